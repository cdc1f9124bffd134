// The CUDA KV compression ops against their CPU references (kernels/cpu/kv_compress_ops.h):
// SnapKV scores, projected value norms, CriticalKV's merge, per-head top-k, compaction, the
// weighted gather and the evicted weights' merge; and greedy generation with compression on CUDA versus the CPU. Kept
// index sets must be equal except where the CPU scores tie within the GPU's rounding. Skips,
// with "no CUDA device: <reason>", on machines without a GPU (fail under KVSERVE_REQUIRE_GPU=1).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <utility>
#include <string>
#include <tuple>
#include <vector>

#include "engine/generator.h"
#include "engine/model/model_loader.h"
#include "engine/model/random_model.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/backend.h"
#include "kernels/cpu/kv_compress_ops.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_device.h"
#include "tests/kernels/cuda/cuda_device_test.h"
#include "tests/kernels/cpu/random_blocks.h"

namespace kvserve {
namespace {

using testing::RandomFloats;

// A layer of one sequence in shuffled pages of a pool with spare pages around it.
struct Layer {
  int64_t len, ps, kvh, hd;
  std::vector<int32_t> pages;
  std::vector<float> k, v, log_w;  // the whole pool
  Layer(int64_t len_, int64_t ps_, int64_t kvh_, int64_t hd_, uint32_t seed)
      : len(len_), ps(ps_), kvh(kvh_), hd(hd_) {
    const int64_t n_pages = (len + ps - 1) / ps, pool = n_pages + 5;
    std::vector<int32_t> order(static_cast<size_t>(pool));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(seed));
    pages.assign(order.begin(), order.begin() + n_pages);
    k = RandomFloats(pool * ps * kvh * hd, seed + 1);
    v = RandomFloats(pool * ps * kvh * hd, seed + 2);
    log_w = RandomFloats(pool * ps * kvh, seed + 3, 0.5f);
  }
  PagedKv Host() { return {k.data(), v.data(), log_w.data(), ps, kvh, hd}; }
};

class CudaKvCompress : public CudaDeviceTest {
 protected:
  PagedKv Device(Layer& L) { return {Up(L.k), Up(L.v), Up(L.log_w), L.ps, L.kvh, L.hd}; }
};

// GPU and CPU kept sets [heads, k] from scores computed on each side: any slot kept by one
// and not the other must sit at the CPU's selection boundary, within tol of the k-th best
// CPU score (an exact tie up to the GPU's rounding). Violations are counted and reported in
// one failure with the first few, not one line each (a broken kernel would print thousands).
void ExpectSameKeptSets(const std::vector<float>& cpu_scores, const std::vector<int32_t>& cpu_slots,
                        const std::vector<int32_t>& gpu_slots, int64_t heads, int64_t len, int64_t k, double tol,
                        const std::string& what) {
  ASSERT_EQ(cpu_slots.size(), gpu_slots.size());
  int64_t differing = 0, not_ties = 0;
  std::string examples;
  for (int64_t h = 0; h < heads; ++h) {
    const float* s = cpu_scores.data() + h * len;
    std::vector<float> sorted(s, s + len);
    std::nth_element(sorted.begin(), sorted.begin() + (k - 1), sorted.end(), std::greater<float>());
    const float kth = sorted[k - 1];
    const std::set<int32_t> a(cpu_slots.begin() + h * k, cpu_slots.begin() + (h + 1) * k),
        b(gpu_slots.begin() + h * k, gpu_slots.begin() + (h + 1) * k);
    for (const std::set<int32_t>* x : {&a, &b}) {
      const std::set<int32_t>& y = x == &a ? b : a;
      for (int32_t slot : *x) {
        if (y.count(slot)) continue;
        ++differing;
        const bool in_range = slot >= 0 && slot < len;
        if (in_range && std::fabs(s[slot] - kth) <= tol * std::fabs(kth) + 1e-12) continue;
        if (++not_ties <= 5) {
          const double score = in_range ? static_cast<double>(s[slot]) : std::numeric_limits<double>::quiet_NaN();
          char e[160];
          std::snprintf(e, sizeof(e), "\n  head %lld slot %d kept only by the %s: score %.7g, k-th best %.7g",
                        static_cast<long long>(h), slot, x == &a ? "CPU" : "GPU", score, static_cast<double>(kth));
          examples += e;
        }
      }
    }
  }
  EXPECT_EQ(not_ties, 0) << what << ": " << not_ties << " of " << differing
                         << " differing kept slots are not ties at the selection boundary; the first:" << examples;
  std::printf("%s: %lld of %lld kept slots differ (%lld not boundary ties)\n", what.c_str(),
              static_cast<long long>(differing / 2), static_cast<long long>(heads * k),
              static_cast<long long>(not_ties));
}

TEST_F(CudaKvCompress, SnapKvScoresAndKeptSets) {
  struct Case {
    int64_t len, w, ps, hd, group;
  };
  uint32_t seed = 1;
  for (const Case& c : {Case{1000, 64, 16, 128, 4}, Case{33, 8, 16, 64, 3}, Case{70, 70, 16, 128, 4},
                        Case{5000, 32, 32, 128, 8}, Case{2000, 64, 64, 64, 1}, Case{777, 16, 16, 16, 2},
                        Case{32768, 64, 16, 128, 4}}) {
    const int64_t kvh = 2, n_heads = kvh * c.group;
    Layer L(c.len, c.ps, kvh, c.hd, seed++);
    const auto window = RandomFloats(c.w * n_heads * c.hd, seed++);
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.hd));
    std::vector<float> want(static_cast<size_t>(kvh * c.len));
    cpu::SnapKvScores(L.Host(), L.pages.data(), c.len, window.data(), c.w, n_heads, scale, 5, want.data());
    float* dscores = Up(std::vector<float>(want.size()));
    gpu_->SnapKvScores(Device(L), L.pages.data(), c.len, Up(window), c.w, {n_heads, scale}, 5, dscores);
    const std::vector<float> got = Down(dscores, want.size());
    const std::string what = "SnapKV len " + std::to_string(c.len) + " w " + std::to_string(c.w) + " page " +
                             std::to_string(c.ps) + " head_dim " + std::to_string(c.hd) + " group " +
                             std::to_string(c.group);
    // Scores outside the window: fp32 on the GPU against a double reference.
    std::vector<float> got_pre, want_pre;
    for (int64_t h = 0; h < kvh; ++h) {
      for (int64_t s = 0; s < c.len - c.w; ++s) {
        got_pre.push_back(got[h * c.len + s]);
        want_pre.push_back(want[h * c.len + s]);
      }
      EXPECT_NEAR(got[h * c.len + c.len - 1], want[h * c.len + c.len - 1], 1e-5) << what << " window score";
    }
    if (!want_pre.empty()) {
      EXPECT_LT(RelError(got_pre, want_pre), 1e-4) << what;
    }
    for (int64_t k : {int64_t{1}, c.len / 10 + 1, c.len / 2}) {
      std::vector<int32_t> cpu_slots(static_cast<size_t>(kvh * k));
      cpu::TopKPerHead(want.data(), kvh, c.len, k, cpu_slots.data());
      int32_t* dslots = Up(std::vector<int32_t>(cpu_slots.size()));
      gpu_->TopKPerHead(dscores, kvh, c.len, k, dslots);
      ExpectSameKeptSets(want, cpu_slots, Down(dslots, cpu_slots.size()), kvh, c.len, k, 1e-4,
                         what + " k " + std::to_string(k));
    }
  }
}

TEST_F(CudaKvCompress, ProjectedValueNormsTensorCoreAndFp32Paths) {
  struct Case {
    int64_t len, first, hd, group, hidden;
  };
  uint32_t seed = 50;
  // head_dim 128 and 64 take the wmma kernel; 32 and hidden 100 the fp32 one.
  for (const Case& c : {Case{300, 0, 128, 4, 4096}, Case{1000, 0, 128, 4, 1024}, Case{517, 200, 64, 3, 576},
                        Case{90, 0, 32, 2, 256}, Case{60, 7, 128, 2, 100}}) {
    const int64_t kvh = 2, n_heads = kvh * c.group, stride = c.len + 9;
    Layer L(c.len, 16, kvh, c.hd, seed++);
    const auto wo = RandomFloats(c.hidden * n_heads * c.hd, seed++, 0.05f);
    std::vector<float> want(static_cast<size_t>(kvh * stride), -7.0f);
    cpu::ProjectedValueNorms(L.Host(), L.pages.data(), c.first, c.len, wo.data(), c.hidden, n_heads, want.data(),
                             stride);
    float* dnorms = Up(std::vector<float>(want.size(), -7.0f));
    gpu_->ProjectedValueNorms(Device(L), L.pages.data(), c.first, c.len,
                              WeightView{DType::kF32, c.hidden, n_heads * c.hd, wo.data()}, n_heads, dnorms, stride);
    const std::vector<float> got = Down(dnorms, want.size());
    const std::string what = "norms len " + std::to_string(c.len) + " first " + std::to_string(c.first) +
                             " head_dim " + std::to_string(c.hd) + " hidden " + std::to_string(c.hidden);
    for (int64_t h = 0; h < kvh; ++h) {
      for (int64_t s = 0; s < stride; ++s) {
        if (s < c.first || s >= c.len) {
          EXPECT_EQ(got[h * stride + s], -7.0f) << what << ": column " << s << " written";
        }
      }
    }
    // bf16 v and W_O, fp32 accumulation.
    EXPECT_LT(RelError(got, want), 1e-2) << what;
  }
}

TEST_F(CudaKvCompress, CriticalKvMergeAndKeptSets) {
  const int64_t heads = 8, len = 20000, stride = 20100;
  auto base = RandomFloats(heads * len, 70), norms = RandomFloats(heads * stride, 71);
  for (float& x : base) x = std::fabs(x);
  for (float& x : norms) x = std::fabs(x) * 10.0f;
  for (int64_t k : {int64_t{10}, int64_t{2000}, int64_t{19999}}) {
    for (int64_t n_first : {int64_t{0}, k / 2, k}) {
      std::vector<float> want(static_cast<size_t>(heads * len));
      cpu::CriticalKvScores(base.data(), norms.data(), stride, heads, len, n_first, 1e-4f, want.data());
      float* dmerged = Up(std::vector<float>(want.size()));
      gpu_->CriticalKvScores(Up(base), Up(norms), stride, heads, len, n_first, 1e-4f, dmerged);
      // The same fp32 operations in the same order: bit-identical.
      EXPECT_EQ(Down(dmerged, want.size()), want) << "k " << k << " n_first " << n_first;
      std::vector<int32_t> cpu_slots(static_cast<size_t>(heads * k));
      cpu::TopKPerHead(want.data(), heads, len, k, cpu_slots.data());
      int32_t* dslots = Up(std::vector<int32_t>(cpu_slots.size()));
      gpu_->TopKPerHead(dmerged, heads, len, k, dslots);
      EXPECT_EQ(Down(dslots, cpu_slots.size()), cpu_slots) << "k " << k << " n_first " << n_first;
    }
  }
}

TEST_F(CudaKvCompress, TopKIsExactIncludingTiesAt128K) {
  // Scores from few values (exact ties everywhere, signed zeros among them) and plain random ones.
  const int64_t heads = 8, len = 131072;
  std::mt19937 rng(80);
  const float values[] = {0.0f, -0.0f, 1.0f, 0.5f, -2.0f, 3.0f, 3.0f};
  std::vector<float> tied(static_cast<size_t>(heads * len));
  for (float& s : tied) s = values[rng() % 7];
  for (const auto& scores : {tied, RandomFloats(heads * len, 81)}) {
    float* dscores = Up(scores);
    for (int64_t k : {int64_t{1}, int64_t{13107}, int64_t{65536}, len}) {
      std::vector<int32_t> want(static_cast<size_t>(heads * k));
      cpu::TopKPerHead(scores.data(), heads, len, k, want.data());
      int32_t* dslots = Up(std::vector<int32_t>(want.size()));
      gpu_->TopKPerHead(dscores, heads, len, k, dslots);
      EXPECT_EQ(Down(dslots, want.size()), want) << "k " << k;
    }
  }
  // Small and odd shapes.
  for (auto [h, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {3, 17, 5}, {32, 1000, 999}}) {
    const auto scores = RandomFloats(h * n, 82);
    std::vector<int32_t> want(static_cast<size_t>(h * k));
    cpu::TopKPerHead(scores.data(), h, n, k, want.data());
    int32_t* dslots = Up(std::vector<int32_t>(want.size()));
    gpu_->TopKPerHead(Up(scores), h, n, k, dslots);
    EXPECT_EQ(Down(dslots, want.size()), want) << h << " heads, " << n << " slots, k " << k;
  }
}

TEST_F(CudaKvCompress, CompactionAndWeightedGather) {
  // k above kCompactChunk (4096) so several chunks run in order.
  for (auto [len, k, ps] : {std::tuple<int64_t, int64_t, int64_t>{20000, 9000, 16}, {100, 37, 32}, {64, 64, 16}}) {
    for (bool weighted : {false, true}) {
      const int64_t kvh = 8, hd = 128;
      Layer L(len, ps, kvh, hd, static_cast<uint32_t>(len + weighted));
      std::mt19937 rng(static_cast<uint32_t>(k));
      const std::vector<int32_t> slots = testing::RandomKeptSlots(len, kvh, k, rng);
      const auto new_log_w = RandomFloats(kvh * k, 90);
      PagedKv dev = Device(L);
      gpu_->CompactKv(dev, L.pages.data(), len, Up(slots), weighted ? Up(new_log_w) : nullptr, k);
      std::vector<int32_t> freed;
      cpu::CompactKv(L.Host(), L.pages.data(), len, slots.data(), weighted ? new_log_w.data() : nullptr, k, &freed);
      const std::vector<float> gk = Down(static_cast<const float*>(dev.k), L.k.size()),
                               gv = Down(static_cast<const float*>(dev.v), L.v.size()),
                               glw = Down(dev.log_w, L.log_w.size());
      int64_t bad = 0;
      for (int64_t i = 0; i < k; ++i) {
        for (int64_t h = 0; h < kvh; ++h) {
          const int64_t off = cpu::KvOffset(L.Host(), L.pages.data(), i, h);
          bad += glw[off] != L.log_w[off];
          for (int64_t e = 0; e < hd; ++e) bad += gk[off * hd + e] != L.k[off * hd + e] || gv[off * hd + e] != L.v[off * hd + e];
        }
      }
      EXPECT_EQ(bad, 0) << "len " << len << " k " << k << (weighted ? " weighted" : "");
      EXPECT_EQ(static_cast<int64_t>(freed.size()), (len + ps - 1) / ps - (k + ps - 1) / ps);
    }
  }
  const std::vector<float> src = RandomFloats(3 * 50, 91);
  const std::vector<int32_t> slots = {0, 7, 49, 1, 2, 3, 10, 20, 30};
  std::vector<float> want(3 * 5, 0.0f);
  cpu::GatherPerHead(src.data(), 50, slots.data(), 3, 3, want.data(), 5);
  float* dst = Up(std::vector<float>(want.size(), 0.0f));
  gpu_->GatherPerHead(Up(src), 50, Up(slots), 3, 3, dst, 5);
  EXPECT_EQ(Down(dst, want.size()), want);
}

// The evicted entries' weight merged into the kept ones: against the double reference on a
// small layer (every log-weight within float rounding), and against the CPU backend's form on
// a long one, where an evicted key about equally near two kept keys may join either (each
// such entry moves its weight between two kept entries): at most 0.5% of the kept entries
// may differ, and each head's total weight must agree. With a radius (merge-near), the same
// on the small layer, where no evicted key sits at the radius within float rounding.
TEST_F(CudaKvCompress, MergeEvictedWeightsAsTheCpu) {
  for (auto [len, k, hd, radius] : {std::tuple<int64_t, int64_t, int64_t, float>{300, 40, 128, INFINITY},
                                    {300, 40, 128, 1.2f},
                                    {20000, 3000, 64, INFINITY}}) {
    const int64_t kvh = 8, ps = 16;
    const bool reference = len < 1000;
    Layer L(len, ps, kvh, hd, static_cast<uint32_t>(len));
    std::mt19937 rng(static_cast<uint32_t>(k));
    const std::vector<int32_t> slots = testing::RandomKeptSlots(len, kvh, k, rng);
    std::vector<float> want(static_cast<size_t>(kvh * k));
    (reference ? cpu::MergeEvictedWeights : cpu::MergeEvictedWeightsTiled)(L.Host(), L.pages.data(), len, slots.data(),
                                                                          k, radius, false, want.data());
    PagedKv dev = Device(L);
    float* out = Up(std::vector<float>(want.size(), 0.0f));
    gpu_->MergeEvictedWeights(dev, L.pages.data(), len, Up(slots), k, radius, false, out);
    const std::vector<float> got = Down(out, want.size());
    int64_t differ = 0;
    for (int64_t h = 0; h < kvh; ++h) {
      double total_want = 0, total_got = 0;
      for (int64_t i = 0; i < k; ++i) {
        const size_t j = static_cast<size_t>(h * k + i);
        differ += std::fabs(got[j] - want[j]) > 1e-4f * std::max(1.0f, std::fabs(want[j]));
        total_want += std::exp(static_cast<double>(want[j]));
        total_got += std::exp(static_cast<double>(got[j]));
      }
      EXPECT_NEAR(total_got, total_want, 1e-5 * total_want) << "len " << len << " radius " << radius << " head " << h;
    }
    EXPECT_LE(differ, reference ? 0 : kvh * k / 200) << "len " << len << " radius " << radius;
    std::printf("merge evicted weights, len %lld k %lld radius %.1f: %lld of %lld kept log-weights differ\n",
                static_cast<long long>(len), static_cast<long long>(k), radius, static_cast<long long>(differ),
                static_cast<long long>(kvh * k));
  }
}

// Values merged too (--evicted-weight merge-values): the kept log-weights and the whole V pool
// after the op (each kept entry's V the weighted mean of its merged values, every other row as
// it was) against the double reference, on the small layer with and without a radius.
TEST_F(CudaKvCompress, MergeEvictedValuesAsTheCpuReference) {
  for (float radius : {INFINITY, 1.2f}) {
    const int64_t len = 300, k = 40, hd = 128, kvh = 8, ps = 16;
    Layer L(len, ps, kvh, hd, 77);
    std::mt19937 rng(5);
    const std::vector<int32_t> slots = testing::RandomKeptSlots(len, kvh, k, rng);
    PagedKv dev = Device(L);  // before the reference changes L.v in place
    std::vector<float> want(static_cast<size_t>(kvh * k));
    cpu::MergeEvictedWeights(L.Host(), L.pages.data(), len, slots.data(), k, radius, true, want.data());
    float* out = Up(std::vector<float>(want.size(), 0.0f));
    gpu_->MergeEvictedWeights(dev, L.pages.data(), len, Up(slots), k, radius, true, out);
    const std::vector<float> got = Down(out, want.size());
    const std::vector<float> got_v = Down(static_cast<float*>(dev.v), L.v.size());
    int64_t differ = 0, v_differ = 0;
    for (size_t j = 0; j < want.size(); ++j) differ += std::fabs(got[j] - want[j]) > 1e-4f * std::max(1.0f, std::fabs(want[j]));
    for (size_t j = 0; j < L.v.size(); ++j) v_differ += std::fabs(got_v[j] - L.v[j]) > 1e-5f * std::max(1.0f, std::fabs(L.v[j]));
    EXPECT_EQ(differ, 0) << "radius " << radius;
    EXPECT_EQ(v_differ, 0) << "radius " << radius;
    std::printf("merge evicted values, len %lld k %lld radius %.1f: %lld log-weights, %lld V elements differ\n",
                static_cast<long long>(len), static_cast<long long>(k), radius, static_cast<long long>(differ),
                static_cast<long long>(v_differ));
  }
}

// Greedy generation with SnapKV and CriticalKV at both compression points, CPU vs CUDA.
void CompareCompressedGeneration(const Model& model, Backend& gpu, const std::vector<int32_t>& prompt) {
  auto tokenizer = Tokenizer::Create(model.tokenizer);
  ASSERT_TRUE(tokenizer.ok());
  auto cpu = MakeCpuBackend();
  for (const char* policy : {"snapkv", "criticalkv"}) {
    // Chunk mode with the question probe (the default, probe_slots on the device path) and
    // without it, and prefill_end.
    // The last rows add --evicted-weight merge, merge-near and merge-values (MergeEvictedWeights inside a real prefill).
    struct Mode {
      CompressAt at;
      ChunkScoring scoring;
      EvictedWeight evicted;
    };
    for (const auto& [at, scoring, evicted] : {Mode{CompressAt::kChunk, ChunkScoring::kQuestion, EvictedWeight::kDrop},
                                               Mode{CompressAt::kChunk, ChunkScoring::kWindow, EvictedWeight::kDrop},
                                               Mode{CompressAt::kPrefillEnd, ChunkScoring::kQuestion, EvictedWeight::kDrop},
                                               Mode{CompressAt::kChunk, ChunkScoring::kQuestion, EvictedWeight::kMerge},
                                               Mode{CompressAt::kChunk, ChunkScoring::kQuestion, EvictedWeight::kMergeNear},
                                               Mode{CompressAt::kChunk, ChunkScoring::kQuestion, EvictedWeight::kMergeValues}}) {
      GenerationOptions o;
      o.max_new_tokens = 40;
      o.ignore_eos = true;
      o.prefill_chunk = 64;
      o.compression.policy = policy;
      o.compression.budget = 0.25;
      o.compression.at = at;
      o.compression.chunk_scoring = scoring;
      o.compression.evicted_weight = evicted;
      auto a = Generate(model, *tokenizer, *cpu, prompt, o, {}, /*keep_logits=*/true);
      auto b = Generate(model, *tokenizer, gpu, prompt, o);
      ASSERT_TRUE(a.ok()) << a.status();
      ASSERT_TRUE(b.ok()) << b.status();
      const std::string what =
          std::string(policy) + (at == CompressAt::kChunk ? " chunk:" + std::string(ChunkScoringName(scoring))
                                                          : std::string(" prefill_end")) +
          (evicted == EvictedWeight::kDrop ? std::string() : " +" + std::string(EvictedWeightName(evicted)));
      EXPECT_EQ(b->compression.evicted_slots, a->compression.evicted_slots) << what;
      EXPECT_EQ(b->kv_slots_at_end, a->kv_slots_at_end) << what;
      size_t same = 0;
      while (same < a->tokens.size() && same < b->tokens.size() && a->tokens[same] == b->tokens[same]) ++same;
      std::printf("%s %s: %zu of %zu greedy tokens identical CPU vs CUDA\n", model.source.c_str(), what.c_str(), same,
                  a->tokens.size());
      // Not asserted: CUDA scores from bf16-GEMM K/V and window queries, so a kept set may
      // differ from the CPU's wherever two entries' scores are close, and the caches (and
      // tokens) drift apart from there, away from any near-tie of the logits. The kernels'
      // exactness is asserted above on shared inputs; here the counts must agree (as in
      // scheduler_check.cc). The near-tie rule is printed for the record.
      if (same < a->tokens.size()) {
        const std::vector<float>& row = a->step_logits[same];
        const auto [lo, hi] = std::minmax_element(row.begin(), row.end());
        std::printf("  first divergence at token %zu: CPU logit gap %.4f (%.2f%% of the row's range)\n", same,
                    row[a->tokens[same]] - row[b->tokens[same]],
                    100.0 * (row[a->tokens[same]] - row[b->tokens[same]]) / (*hi - *lo));
      }
    }
  }
}

TEST_F(CudaKvCompress, GenerationWithCompressionMatchesTheCpu) {
  // random:tiny has head_dim 16: the fp32 norms kernel.
  auto model = MakeRandomModel("tiny", 3);
  ASSERT_TRUE(model.ok());
  std::vector<int32_t> prompt;
  for (int i = 0; i < 400; ++i) prompt.push_back((i * 41 + 3) % 500);
  CompareCompressedGeneration(*model, *gpu_, prompt);
}

// SmolLM2-135M's shape with random weights (head_dim 64: the tensor-core norms kernel; a
// group of 3; 30 layers), so the shape is covered where the model file is not (the GPU machine).
TEST_F(CudaKvCompress, GenerationWithCompressionMatchesTheCpuOnRandomSmolLM2Shape) {
  auto model = MakeRandomModel("smollm2-135m", 3);
  ASSERT_TRUE(model.ok()) << model.status();
  CompareCompressedGeneration(*model, *gpu_, RandomModelPrompt(model->config.vocab_size, 400, 4099, 7));
}

TEST_F(CudaKvCompress, GenerationWithCompressionMatchesTheCpuOnSmolLM2) {
  // head_dim 64: the tensor-core norms kernel inside a real model's generation.
  const char* path = std::getenv("KVSERVE_SMOLLM2_GGUF");
  if (!path || !std::filesystem::exists(path)) {
    GTEST_SKIP() << "SmolLM2 model file not found (" << (path ? path : "KVSERVE_SMOLLM2_GGUF unset")
                 << "); run scripts/fetch-model.sh (the RandomSmolLM2Shape test covers its shape)";
  }
  auto model = LoadModel(path);
  ASSERT_TRUE(model.ok()) << model.status();
  auto tokenizer = Tokenizer::Create(model->tokenizer);
  ASSERT_TRUE(tokenizer.ok());
  std::string text;
  for (int i = 0; i < 12; ++i) {
    text += "Record " + std::to_string(i) + ": the harbour town kept its ledgers in the old customs house. ";
  }
  CompareCompressedGeneration(*model, *gpu_, tokenizer->Encode(text, true, true));
}

}  // namespace
}  // namespace kvserve
