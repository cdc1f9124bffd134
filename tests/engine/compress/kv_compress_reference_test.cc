// The chain CPU backend == kernels/cpu reference (== CUDA kernel, tests/kernels/cuda): the CPU
// references of the compression ops against the CPU backend's float forms and against
// engine/compress's SnapKV and CriticalKV policies and compaction, on random layers in
// shuffled pages.
#include "kernels/cpu/kv_compress_ops.h"

#include <cmath>
#include <random>

#include <algorithm>
#include <numeric>

#include "engine/compress/compaction.h"
#include "engine/compress/criticalkv_policy.h"
#include "engine/compress/snapkv_policy.h"
#include "tests/engine/compress/layer_fixture.h"

namespace kvserve {
namespace {

std::vector<float> Normal(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  return x;
}

// A layer with random keys, values and log-weights, and a window of random queries.
struct RandomLayer {
  static constexpr int64_t kKvHeads = 2, kGroup = 3, kHeadDim = 8, kHeads = kKvHeads * kGroup, kHidden = 24;
  RandomLayer(int64_t len, int64_t window_len, uint32_t seed) : f(len, kKvHeads, kHeadDim) {
    f.FillRandom(seed);
    f.log_w = Normal(f.log_w.size(), seed + 1, 0.5f);
    f.Store();
    window = Normal(static_cast<size_t>(window_len * kHeads * kHeadDim), seed + 2);
    wo = Normal(static_cast<size_t>(kHidden * kHeads * kHeadDim), seed + 3);
    r.layer = f.layer();
    r.window = window;
    r.window_len = window_len;
    r.n_heads = kHeads;
    r.scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
    r.wo = WeightView{DType::kF32, kHidden, kHeads * kHeadDim, wo.data()};
  }
  // The last min(window_len, len) queries, as the references take them.
  const float* LastQueries() const {
    return window.data() + (r.window_len - std::min(r.window_len, r.layer.len)) * kHeads * kHeadDim;
  }
  // The CPU backend's scores.
  std::vector<float> BackendScores(Backend& backend, int64_t kernel) const {
    std::vector<float> s(static_cast<size_t>(kKvHeads * r.layer.len));
    backend.SnapKvScores(r.layer.kv, r.layer.pages.data(), r.layer.len, LastQueries(),
                         std::min(r.window_len, r.layer.len), AttentionShape{kHeads, r.scale}, kernel, s.data());
    return s;
  }
  std::vector<float> RefScores(int64_t kernel) const {
    std::vector<float> s(static_cast<size_t>(kKvHeads * r.layer.len));
    cpu::SnapKvScores(r.layer.kv, r.layer.pages.data(), r.layer.len, LastQueries(),
                      std::min(r.window_len, r.layer.len), kHeads, r.scale, kernel, s.data());
    return s;
  }

  LayerFixture f;
  std::vector<float> window, wo;
  SelectionRequest r;
};

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, double rel) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], rel * std::fabs(want[i]) + 1e-7) << "at " << i;
  }
}

TEST(KvCompressReferenceTest, SnapKvScoresMatchTheCpuBackend) {
  auto backend = MakeCpuBackend();
  // (len, window): window shorter than, equal to and longer than the layer.
  for (auto [len, window_len] : {std::pair<int64_t, int64_t>{61, 7}, {9, 9}, {5, 8}, {40, 1}}) {
    RandomLayer L(len, window_len, 11 + static_cast<uint32_t>(len));
    ExpectClose(L.RefScores(5), L.BackendScores(*backend, 5), 1e-5);
  }
}

TEST(KvCompressReferenceTest, SnapKvKeptSetsMatchTheEngineSelection) {
  auto backend = MakeCpuBackend();
  RandomLayer L(77, 6, 3);
  const std::vector<float> ref = L.RefScores(5);
  for (int64_t k : {1, 6, 20, 77}) {
    L.r.n_keep = k;
    const Selection sel = SnapKvPolicy("snapkv", 5).Select(L.r, *backend);
    std::vector<int32_t> slots(static_cast<size_t>(RandomLayer::kKvHeads * k));
    cpu::TopKPerHead(ref.data(), RandomLayer::kKvHeads, 77, k, slots.data());
    EXPECT_EQ(slots, sel.slots) << "k " << k;
  }
}

TEST(KvCompressReferenceTest, ProjectedValueNormsMatchTheCpuBackend) {
  auto backend = MakeCpuBackend();
  RandomLayer L(45, 4, 7);
  for (int64_t first : {0, 13}) {
    const int64_t stride = 50;
    std::vector<float> engine(static_cast<size_t>(RandomLayer::kKvHeads * stride), -1.0f);
    backend->ProjectedValueNorms(L.r.layer.kv, L.r.layer.pages.data(), first, 45, L.r.wo, RandomLayer::kHeads,
                                 engine.data(), stride);
    std::vector<float> ref(static_cast<size_t>(RandomLayer::kKvHeads * stride), -1.0f);
    cpu::ProjectedValueNorms(L.r.layer.kv, L.r.layer.pages.data(), first, 45, L.wo.data(), RandomLayer::kHidden,
                             RandomLayer::kHeads, ref.data(), stride);
    for (int64_t h = 0; h < RandomLayer::kKvHeads; ++h) {
      for (int64_t s = 0; s < stride; ++s) {
        const float got = ref[h * stride + s];
        if (s < first || s >= 45) {
          EXPECT_EQ(got, -1.0f) << "column " << s << " outside [first, len) was written";
          EXPECT_EQ(engine[h * stride + s], -1.0f) << "column " << s << " outside [first, len) was written";
        } else {
          const float want = engine[h * stride + s];
          EXPECT_NEAR(got, want, 1e-5 * want) << "head " << h << " slot " << s;
        }
      }
    }
  }
}

TEST(KvCompressReferenceTest, CriticalKvKeptSetsMatchThePolicy) {
  auto backend = MakeCpuBackend();
  for (double ratio : {0.0, 0.5, 1.0}) {
    RandomLayer L(90, 8, 21);
    // Values of very different sizes so stage 2 (the norms) reorders the base score.
    for (size_t i = 0; i < L.f.v.size(); ++i) L.f.v[i] *= 0.1f + static_cast<float>(i % 7);
    L.f.Store();
    const int64_t len = 90, heads = RandomLayer::kKvHeads;
    for (int64_t k : {4, 25, 60}) {
      L.r.n_keep = k;
      const Selection sel = CriticalKvPolicy(5, ratio).Select(L.r, *backend);
      const std::vector<float> base = L.RefScores(5);
      std::vector<float> norms(static_cast<size_t>(heads * len)), merged(norms.size());
      cpu::ProjectedValueNorms(L.r.layer.kv, L.r.layer.pages.data(), 0, len, L.wo.data(), RandomLayer::kHidden,
                               RandomLayer::kHeads, norms.data(), len);
      const auto n_first = static_cast<int64_t>(std::floor(k * ratio));
      cpu::CriticalKvScores(base.data(), norms.data(), len, heads, len, n_first, 1e-4f, merged.data());
      std::vector<int32_t> slots(static_cast<size_t>(heads * k));
      cpu::TopKPerHead(merged.data(), heads, len, k, slots.data());
      EXPECT_EQ(slots, sel.slots) << "ratio " << ratio << " k " << k;
    }
  }
}

TEST(KvCompressReferenceTest, TopKBreaksTiesLikeAFullSort) {
  // Scores from a handful of values (many exact ties, signed zeros among them).
  const int64_t heads = 3, len = 200;
  std::mt19937 rng(9);
  const float values[] = {0.0f, -0.0f, 1.0f, 2.5f, -1.0f};
  std::vector<float> scores(static_cast<size_t>(heads * len));
  for (float& s : scores) s = values[rng() % 5];
  for (int64_t k : {1, 37, 100, 199, 200}) {
    std::vector<int32_t> want;
    for (int64_t h = 0; h < heads; ++h) {
      const float* sc = scores.data() + h * len;
      std::vector<int32_t> order(static_cast<size_t>(len));
      std::iota(order.begin(), order.end(), 0);
      std::sort(order.begin(), order.end(),
                [&](int32_t a, int32_t b) { return sc[a] > sc[b] || (sc[a] == sc[b] && a < b); });
      std::sort(order.begin(), order.begin() + k);
      want.insert(want.end(), order.begin(), order.begin() + k);
    }
    std::vector<int32_t> slots(static_cast<size_t>(heads * k));
    cpu::TopKPerHead(scores.data(), heads, len, k, slots.data());
    EXPECT_EQ(slots, want) << "k " << k;
  }
  // The rule itself: among equal scores the lower slot is kept.
  const std::vector<float> flat = {1, 3, 3, 3, 0, 3};
  std::vector<int32_t> two(2);
  cpu::TopKPerHead(flat.data(), 1, 6, 2, two.data());
  EXPECT_EQ(two, (std::vector<int32_t>{1, 2}));
}

TEST(KvCompressReferenceTest, CompactionMatchesCompactLayerAndListsTheFreedPages) {
  for (bool weighted : {false, true}) {
    const int64_t len = 29, heads = 2, d = 3, k = 9;  // page size 4: 8 pages, 3 kept
    LayerFixture a(len, heads, d), b(len, heads, d);
    a.FillRandom(5);
    b.FillRandom(5);
    a.log_w = b.log_w = Normal(a.log_w.size(), 6);
    a.Store();
    b.Store();
    Selection sel;
    sel.n_keep = k;
    std::mt19937 rng(static_cast<uint32_t>(weighted));
    for (int64_t h = 0; h < heads; ++h) {
      std::vector<int32_t> all(static_cast<size_t>(len));
      std::iota(all.begin(), all.end(), 0);
      std::shuffle(all.begin(), all.end(), rng);
      all.resize(static_cast<size_t>(k));
      std::sort(all.begin(), all.end());
      for (int32_t s : all) {
        sel.slots.push_back(s);
        sel.log_w.push_back(weighted ? static_cast<float>(s) * 0.25f - 3.0f : a.layer().LogWeight(s, h));
      }
    }
    const std::vector<int32_t> pages_before = a.seq.layer_pages[0];
    ASSERT_TRUE(CompactLayer(*MakeCpuBackend(), a.pool, a.seq, 0, sel).ok());
    std::vector<int32_t> freed;
    const LayerKv lb = b.layer();
    cpu::CompactKv(lb.kv, lb.pages.data(), len, sel.slots.data(), weighted ? sel.log_w.data() : nullptr, k, &freed);
    EXPECT_EQ(freed, std::vector<int32_t>(pages_before.begin() + 3, pages_before.end()));
    const LayerKv la = a.layer();
    for (int64_t i = 0; i < k; ++i) {
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t e = 0; e < d; ++e) {
          EXPECT_EQ(lb.Key(i, h)[e], la.Key(i, h)[e]);
          EXPECT_EQ(lb.Value(i, h)[e], la.Value(i, h)[e]);
        }
        EXPECT_EQ(lb.LogWeight(i, h), la.LogWeight(i, h)) << "slot " << i << " head " << h;
        EXPECT_EQ(lb.LogWeight(i, h), sel.log_w[h * k + i]);
      }
    }
  }
}

TEST(KvCompressReferenceTest, GatherPerHeadFollowsTheSlots) {
  const std::vector<float> src = {0, 1, 2, 3, 4, 10, 11, 12, 13, 14};  // [2, 5]
  const std::vector<int32_t> slots = {1, 4, 0, 3};                      // [2, 2]
  std::vector<float> dst(6, -1.0f);                                     // [2, 3]
  cpu::GatherPerHead(src.data(), 5, slots.data(), 2, 2, dst.data(), 3);
  EXPECT_EQ(dst, (std::vector<float>{1, 4, -1, 10, 13, -1}));
}

}  // namespace
}  // namespace kvserve
