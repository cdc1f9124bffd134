// Merging the evicted entries' weight (EvictedWeight::kMerge) and values (kMergeValues) into
// the kept ones: the CPU reference on a hand-made layer, the CPU backend's tiled form against
// the reference on random layers (f32 and f16 K/V), the weight a layer carries conserved,
// attention over the merged entries closer to the full cache's than over the same entries
// without, and LayerCompressor doing the same through a device pool's Backend ops as on the host.
#include <cmath>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "engine/compress/layer_compressor.h"
#include "kernels/cpu/kv_compress_ops.h"
#include "tests/engine/compress/layer_fixture.h"
#include "tests/kernels/cpu/random_blocks.h"
#include "tests/kernels/host_as_device_backend.h"

namespace kvserve {
namespace {

// The kept slots [heads, k] of a layer (ascending per head): per head a random subset.
std::vector<int32_t> RandomKept(int64_t len, int64_t heads, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  return testing::RandomKeptSlots(len, heads, k, rng);
}

// The merged log-weights [heads, k]; with merge_values, f's kept V rows change in place.
std::vector<float> Merged(LayerFixture& f, const std::vector<int32_t>& slots, int64_t k, bool tiled,
                          float radius = INFINITY, bool merge_values = false) {
  const LayerKv L = f.layer();
  std::vector<float> out(static_cast<size_t>(L.kv.n_kv_heads * k));
  (tiled ? cpu::MergeEvictedWeightsTiled : cpu::MergeEvictedWeights)(L.kv, L.pages.data(), L.len, slots.data(), k,
                                                                     radius, merge_values, out.data());
  return out;
}

TEST(MergeEvictedWeightsTest, EachEvictedEntryJoinsTheKeptEntryWithTheNearestKey) {
  // One head, 2-dim keys on a line: kept slots 0 (at 0) and 1 (at 10).
  LayerFixture f(6, 1, 2);
  const float xs[] = {0, 10, 1, 9, 0.4f, 6};
  for (int s = 0; s < 6; ++s) {
    f.k[s * 2] = xs[s];
    f.k[s * 2 + 1] = 0;
  }
  f.log_w = {0, 0, 0, 0, std::log(3.0f), -INFINITY};  // slot 5 weighs nothing: it carries nothing
  f.Store();
  const std::vector<int32_t> kept = {0, 1};
  for (bool tiled : {false, true}) {
    const std::vector<float> w = Merged(f, kept, 2, tiled);
    EXPECT_NEAR(w[0], std::log(5.0f), 1e-6) << "slot 0 stands for 0, 2 (at 1) and 4 (at 0.4, weight 3); tiled " << tiled;
    EXPECT_NEAR(w[1], std::log(2.0f), 1e-6) << "slot 1 stands for 1 and 3 (at 9); tiled " << tiled;
  }
  // A kept entry of no weight that no evicted entry joins keeps no weight.
  f.log_w = {-INFINITY, 0, 0, 0, 0, 0};
  f.k[0] = -100;
  f.Store();
  for (bool tiled : {false, true}) {
    const std::vector<float> w = Merged(f, kept, 2, tiled);
    EXPECT_EQ(w[0], -INFINITY) << tiled;
    EXPECT_NEAR(w[1], std::log(5.0f), 1e-6) << tiled;
  }
}

TEST(MergeEvictedWeightsTest, MergedValuesAreTheWeightedMeanOfTheValuesEachKeptEntryStandsFor) {
  // The layer of the test above (kept slots 0 and 1), each slot's value (s, 10 s).
  LayerFixture f(6, 1, 2, 4, DType::kF32);
  const float xs[] = {0, 10, 1, 9, 0.4f, 6};
  for (bool tiled : {false, true}) {
    for (int s = 0; s < 6; ++s) {
      f.k[s * 2] = xs[s];
      f.k[s * 2 + 1] = 0;
      f.v[s * 2] = static_cast<float>(s);
      f.v[s * 2 + 1] = 10.0f * s;
    }
    f.log_w = {0, 0, 0, 0, std::log(3.0f), -INFINITY};
    f.Store();
    const std::vector<float> w = Merged(f, {0, 1}, 2, tiled, INFINITY, /*merge_values=*/true);
    EXPECT_NEAR(w[0], std::log(5.0f), 1e-6) << "the weights are merge's; tiled " << tiled;
    EXPECT_NEAR(w[1], std::log(2.0f), 1e-6) << tiled;
    const LayerKv L = f.layer();
    // Slot 0 stands for slots 0, 2 and 4 (weights 1, 1, 3): (0 + 2 + 3 * 4) / 5 = 2.8.
    EXPECT_NEAR(L.Value(0, 0)[0], 2.8f, 1e-5) << tiled;
    EXPECT_NEAR(L.Value(0, 0)[1], 28.0f, 1e-4) << tiled;
    // Slot 1 for slots 1 and 3; slot 5 (weight 0) adds nothing: (1 + 3) / 2.
    EXPECT_NEAR(L.Value(1, 0)[0], 2.0f, 1e-5) << tiled;
    EXPECT_NEAR(L.Value(1, 0)[1], 20.0f, 1e-4) << tiled;
    for (int s = 2; s < 6; ++s) EXPECT_EQ(L.Value(s, 0)[0], static_cast<float>(s)) << "evicted slot " << s << " untouched";
    for (int s = 0; s < 6; ++s) EXPECT_EQ(L.Key(s, 0)[0], xs[s]) << "keys stay; slot " << s;
  }
  // Without merge_values the values stay.
  f.Store();
  Merged(f, {0, 1}, 2, true);
  EXPECT_EQ(f.layer().Value(0, 0)[0], 0.0f);
}

TEST(MergeEvictedWeightsTest, WithARadiusAnEvictedEntryFarFromEveryKeptKeyIsDropped) {
  // One head, kept keys (10, 0) and (0, 10). Evicted: (9, 0) is 1 from the first, a ninth of its
  // length; (0, 7) is 3 from the second, 0.43 of it; (3, 3) is 7.6 from both, 1.8 times its
  // length; (0, 6) is 4 from the second, 0.67 of it.
  LayerFixture f(6, 1, 2);
  const float keys[6][2] = {{10, 0}, {0, 10}, {9, 0}, {0, 7}, {3, 3}, {0, 6}};
  for (int s = 0; s < 6; ++s) {
    f.k[s * 2] = keys[s][0];
    f.k[s * 2 + 1] = keys[s][1];
  }
  f.log_w.assign(6, 0.0f);
  f.Store();
  const std::vector<int32_t> kept = {0, 1};
  for (bool tiled : {false, true}) {
    const std::vector<float> near = Merged(f, kept, 2, tiled, kMergeNearRadius);
    EXPECT_NEAR(near[0], std::log(2.0f), 1e-6) << "(10, 0) stands for itself and (9, 0) only; tiled " << tiled;
    EXPECT_NEAR(near[1], std::log(2.0f), 1e-6) << "(0, 10) for itself and (0, 7) only; tiled " << tiled;
    const std::vector<float> all = Merged(f, kept, 2, tiled);
    EXPECT_NEAR(all[0], std::log(3.0f), 1e-6) << "without a radius (3, 3) joins the first (a tie); tiled " << tiled;
    EXPECT_NEAR(all[1], std::log(3.0f), 1e-6) << "and (0, 6) the second; tiled " << tiled;
    const std::vector<float> wide = Merged(f, kept, 2, tiled, 0.7f);
    EXPECT_NEAR(wide[1], std::log(3.0f), 1e-6) << "0.67 is inside a radius of 0.7; tiled " << tiled;
  }
}

TEST(MergeEvictedWeightsTest, AnEvictedKeyWithNoFiniteDistanceIsDroppedNotMergedIntoTheFirstKeptEntry) {
  // One head, kept keys (10, 0) and (0, 10); evicted (0, 9), then a NaN key and an infinite one
  // (a model gone wrong). Those two have no nearest key: their weight is dropped in both forms,
  // with and without a radius, rather than landing on kept entry 0 (or out of bounds).
  LayerFixture f(5, 1, 2);
  const float keys[5][2] = {{10, 0}, {0, 10}, {0, 9}, {NAN, 1}, {INFINITY, 0}};
  for (int s = 0; s < 5; ++s) {
    f.k[s * 2] = keys[s][0];
    f.k[s * 2 + 1] = keys[s][1];
  }
  f.log_w.assign(5, 0.0f);
  f.Store();
  const std::vector<int32_t> kept = {0, 1};
  for (float radius : {INFINITY, kMergeNearRadius}) {
    for (bool tiled : {false, true}) {
      const std::vector<float> w = Merged(f, kept, 2, tiled, radius);
      EXPECT_NEAR(w[0], 0.0f, 1e-6) << "(10, 0) stands for itself only; tiled " << tiled << ", radius " << radius;
      EXPECT_NEAR(w[1], std::log(2.0f), 1e-6) << "(0, 10) for itself and (0, 9); tiled " << tiled << ", radius " << radius;
    }
  }
}

TEST(MergeEvictedWeightsTest, TheBackendFormMatchesTheReferenceAndConservesTheWeight) {
  for (DType dtype : {DType::kF32, DType::kF16}) {
    // The last: kept x evicted distances over several panel chunks and row blocks of the tiled form.
    for (const auto& [len, k] : {std::pair<int64_t, int64_t>{9, 1}, {70, 10}, {301, 43}, {6000, 3000}}) {
      const int64_t heads = 3, d = 16;
      LayerFixture f(len, heads, d, 16, dtype);
      f.FillRandom(static_cast<uint32_t>(len));
      std::mt19937 rng(static_cast<uint32_t>(len) + 1);
      std::normal_distribution<float> n(0.0f, 2.0f);
      for (float& lw : f.log_w) lw = n(rng);
      f.log_w[3] = -INFINITY;
      f.Store();
      const std::vector<int32_t> kept = RandomKept(len, heads, k, 5);
      const std::vector<float> ref = Merged(f, kept, k, false), fast = Merged(f, kept, k, true);
      auto backend = MakeCpuBackend();
      std::vector<float> op(ref.size());
      const LayerKv L = f.layer();
      backend->MergeEvictedWeights(L.kv, L.pages.data(), len, kept.data(), k, INFINITY, false, op.data());
      for (size_t i = 0; i < ref.size(); ++i) {
        EXPECT_NEAR(fast[i], ref[i], 1e-4) << "len " << len << " entry " << i;
        EXPECT_EQ(op[i], fast[i]) << "the CPU backend runs the tiled form";
      }
      // With a radius that drops some evicted entries and merges others (random keys of 16
      // dimensions sit about their own length from the nearest kept key).
      const std::vector<float> ref_near = Merged(f, kept, k, false, 1.0f), fast_near = Merged(f, kept, k, true, 1.0f);
      int64_t dropped_some = 0;
      for (size_t i = 0; i < ref.size(); ++i) {
        EXPECT_NEAR(fast_near[i], ref_near[i], 1e-4) << "radius 1, len " << len << " entry " << i;
        dropped_some += ref_near[i] < ref[i] - 1e-3f;
      }
      if (len > 100) {
        EXPECT_GT(dropped_some, 0) << "len " << len << ": the radius changed nothing";
      }
      for (int64_t h = 0; h < heads; ++h) {
        double before = 0, after = 0;
        for (int64_t s = 0; s < len; ++s) before += std::exp(static_cast<double>(L.LogWeight(s, h)));
        for (int64_t i = 0; i < k; ++i) after += std::exp(static_cast<double>(ref[h * k + i]));
        EXPECT_NEAR(after, before, 1e-6 * before) << "head " << h << ": the kept entries carry the whole weight (to float log-weights)";
      }
      // Values merged too, with a radius that merges some (as above): the reference and the backend's form
      // write the same kept V rows (to f16 rounding: their double sums add in another order).
      LayerFixture g(len, heads, d, 16, dtype);
      g.k = f.k;
      g.v = f.v;
      g.log_w = f.log_w;
      f.Store();
      g.Store();
      const std::vector<float> ref_v = Merged(f, kept, k, false, 1.0f, true);
      std::vector<float> op_v(ref_v.size());
      backend->MergeEvictedWeights(g.layer().kv, g.layer().pages.data(), len, kept.data(), k, 1.0f, true, op_v.data());
      int64_t changed = 0;
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t i = 0; i < k; ++i) {
          const int32_t s = kept[h * k + i];
          EXPECT_NEAR(op_v[h * k + i], ref_v[h * k + i], 1e-4) << "merge-values weights, len " << len;
          const std::vector<float> a = f.layer().Value(s, h), b = g.layer().Value(s, h);
          for (int64_t e = 0; e < d; ++e) {
            EXPECT_NEAR(b[e], a[e], 2e-3 * std::max(1.0f, std::fabs(a[e]))) << "len " << len << " slot " << s;
            changed += std::fabs(a[e] - f.v[(s * heads + h) * d + e]) > 0.01f;
          }
        }
      }
      if (len > 100) {
        EXPECT_GT(changed, 0) << "len " << len << ": no kept value changed";
      }
    }
  }
}

// softmax(q . k * scale + log_w) v over the first n slots of head 0 of L (weights from log_w
// when given, else L's own), in double.
std::vector<double> Attend(const LayerKv& L, int64_t n, const std::vector<float>& q, const float* log_w) {
  const int64_t d = L.kv.head_dim;
  std::vector<double> logit(static_cast<size_t>(n)), out(static_cast<size_t>(d), 0.0);
  double mx = -INFINITY, sum = 0;
  for (int64_t s = 0; s < n; ++s) {
    const std::vector<float> key = L.Key(s, 0);
    double dot = 0;
    for (int64_t e = 0; e < d; ++e) dot += static_cast<double>(q[e]) * key[e];
    logit[s] = dot / std::sqrt(static_cast<double>(d)) + (log_w ? log_w[s] : L.LogWeight(s, 0));
    mx = std::max(mx, logit[s]);
  }
  for (int64_t s = 0; s < n; ++s) {
    const double p = std::exp(logit[s] - mx);
    sum += p;
    const std::vector<float> v = L.Value(s, 0);
    for (int64_t e = 0; e < d; ++e) out[e] += p * v[e];
  }
  for (double& x : out) x /= sum;
  return out;
}

TEST(MergeEvictedWeightsTest, AttentionOverMergedEntriesIsCloserToTheFullCache) {
  // A prompt that repeats itself: 16 distinct (key, value) pairs, each seen 4-40 times with a
  // little noise. Keeping one entry of each, a query that matches none strongly still sees
  // each kind as often as the full cache does only when the kept entry carries its copies.
  const int64_t kinds = 16, d = 8;
  std::mt19937 rng(3);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<std::vector<float>> key(kinds), value(kinds);
  std::vector<int64_t> copies;
  for (int64_t c = 0; c < kinds; ++c) {
    for (int64_t e = 0; e < d; ++e) {
      key[c].push_back(n(rng));
      value[c].push_back(n(rng));
    }
    copies.push_back(4 + (c * 9) % 37);
  }
  const int64_t len = std::accumulate(copies.begin(), copies.end(), int64_t{0});
  LayerFixture f(len, 1, d);
  std::vector<int32_t> kept;
  int64_t s = 0;
  for (int64_t c = 0; c < kinds; ++c) {
    for (int64_t i = 0; i < copies[c]; ++i, ++s) {
      if (i == copies[c] / 2) kept.push_back(static_cast<int32_t>(s));
      for (int64_t e = 0; e < d; ++e) {
        f.k[s * d + e] = key[c][e] + 0.05f * n(rng);
        f.v[s * d + e] = value[c][e] + 0.05f * n(rng);
      }
    }
  }
  f.Store();
  const int64_t k = kinds;
  const std::vector<float> merged = Merged(f, kept, k, false);
  // The kept entries alone, at their own weight or the merged one.
  LayerFixture dropped(k, 1, d), weighted(k, 1, d);
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t e = 0; e < d; ++e) {
      dropped.k[i * d + e] = weighted.k[i * d + e] = f.k[kept[i] * d + e];
      dropped.v[i * d + e] = weighted.v[i * d + e] = f.v[kept[i] * d + e];
    }
    weighted.log_w[i] = merged[i];
  }
  dropped.Store();
  weighted.Store();
  double err_drop = 0, err_merge = 0;
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> q(static_cast<size_t>(d));
    for (float& x : q) x = 0.5f * n(rng);
    const std::vector<double> full = Attend(f.layer(), len, q, nullptr), a = Attend(dropped.layer(), k, q, nullptr),
                              b = Attend(weighted.layer(), k, q, nullptr);
    for (int64_t e = 0; e < d; ++e) {
      err_drop += (a[e] - full[e]) * (a[e] - full[e]);
      err_merge += (b[e] - full[e]) * (b[e] - full[e]);
    }
  }
  EXPECT_LT(err_merge, 0.05 * err_drop) << "merged " << err_merge << ", dropped " << err_drop;
}

TEST(MergeEvictedWeightsTest, MergedValuesBringAttentionCloserStillWhenNeighboursSayDifferentThings) {
  // 12 kinds of key, each seen 10-30 times with a little noise, but each copy's value far from
  // its kind's (noise 1): one kept entry per kind, weighted for its copies, still speaks with
  // one copy's value unless the values merge too.
  const int64_t kinds = 12, d = 8;
  std::mt19937 rng(11);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<int64_t> copies;
  for (int64_t c = 0; c < kinds; ++c) copies.push_back(10 + (c * 7) % 21);
  const int64_t len = std::accumulate(copies.begin(), copies.end(), int64_t{0});
  LayerFixture full(len, 1, d), weights_only(len, 1, d), with_values(len, 1, d);
  std::vector<int32_t> kept;
  for (int64_t c = 0, s = 0; c < kinds; ++c) {
    std::vector<float> key(static_cast<size_t>(d));
    for (float& x : key) x = n(rng);
    for (int64_t i = 0; i < copies[c]; ++i, ++s) {
      if (i == 0) kept.push_back(static_cast<int32_t>(s));
      for (int64_t e = 0; e < d; ++e) {
        full.k[s * d + e] = key[e] + 0.02f * n(rng);
        full.v[s * d + e] = n(rng);
      }
    }
  }
  for (LayerFixture* f : {&full, &weights_only, &with_values}) {
    f->k = full.k;
    f->v = full.v;
    f->Store();
  }
  const int64_t k = kinds;
  for (auto [f, values] : {std::pair{&weights_only, false}, std::pair{&with_values, true}}) {
    const std::vector<float> w = Merged(*f, kept, k, false, kMergeNearRadius, values);
    const LayerKv L = f->layer();
    cpu::CompactKv(L.kv, L.pages.data(), L.len, kept.data(), w.data(), k, nullptr);
  }
  double err_weights = 0, err_values = 0;
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> q(static_cast<size_t>(d));
    for (float& x : q) x = 0.5f * n(rng);
    const std::vector<double> want = Attend(full.layer(), len, q, nullptr),
                              a = Attend(weights_only.layer(), k, q, nullptr), b = Attend(with_values.layer(), k, q, nullptr);
    for (int64_t e = 0; e < d; ++e) {
      err_weights += (a[e] - want[e]) * (a[e] - want[e]);
      err_values += (b[e] - want[e]) * (b[e] - want[e]);
    }
  }
  EXPECT_LT(err_values, 0.05 * err_weights) << "values merged " << err_values << ", weights only " << err_weights;
}

TEST(MergeEvictedWeightsTest, LayerCompressorMergesOnADevicePoolAsTheReferenceDoes) {
  const int64_t len = 90, kvh = 2, group = 2, d = 8, hidden = 16, window_len = 6, k = 20;
  LayerFixture f(len, kvh, d), dev(len, kvh, d);
  f.FillRandom(6);
  dev.FillRandom(6);
  std::mt19937 rng(9);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> window(static_cast<size_t>(window_len * kvh * group * d)),
      wo(static_cast<size_t>(hidden * kvh * group * d));
  for (float& x : window) x = n(rng);
  for (float& x : wo) x = n(rng);
  CompressionSettings s;
  s.policy = "snapkv";
  const std::unique_ptr<KvPolicy> p = *MakeKvPolicy(s);
  auto cpu = MakeCpuBackend();
  const Selection sel = p->Select(f.Request(window, window_len, kvh * group, wo, k), *cpu);
  const std::vector<float> want = Merged(f, sel.slots, k, false);

  HostAsDeviceBackend backend;
  LayerCompressor compressor(backend, dynamic_cast<const ScoringPolicy&>(*p), 1, EvictedWeight::kMerge);
  CompressionStats stats;
  ASSERT_TRUE(compressor.Compress(dev.Request(window, window_len, kvh * group, wo, k), dev.pool, dev.seq, 0, &stats).ok());
  ASSERT_EQ(dev.seq.layer_len[0], k);
  const LayerKv L = dev.layer();
  for (int64_t h = 0; h < kvh; ++h) {
    for (int64_t i = 0; i < k; ++i) {
      EXPECT_EQ(L.Key(i, h), f.layer().Key(sel.slots[h * k + i], h)) << "head " << h << " entry " << i;
      EXPECT_NEAR(L.LogWeight(i, h), want[h * k + i], 1e-4) << "head " << h << " entry " << i;
    }
  }
  // kMergeValues: merge-near's weights, and the kept V rows the reference's means.
  LayerFixture g(len, kvh, d), dev_values(len, kvh, d);
  g.FillRandom(6);
  dev_values.FillRandom(6);
  const std::vector<float> want_values = Merged(g, sel.slots, k, false, kMergeNearRadius, true);
  LayerCompressor merging_values(backend, dynamic_cast<const ScoringPolicy&>(*p), 1, EvictedWeight::kMergeValues);
  ASSERT_TRUE(merging_values
                  .Compress(dev_values.Request(window, window_len, kvh * group, wo, k), dev_values.pool,
                            dev_values.seq, 0, &stats)
                  .ok());
  for (int64_t h = 0; h < kvh; ++h) {
    for (int64_t i = 0; i < k; ++i) {
      EXPECT_NEAR(dev_values.layer().LogWeight(i, h), want_values[h * k + i], 1e-4) << "head " << h << " entry " << i;
      const std::vector<float> got = dev_values.layer().Value(i, h), ref = g.layer().Value(sel.slots[h * k + i], h);
      for (int64_t e = 0; e < d; ++e) EXPECT_NEAR(got[e], ref[e], 1e-5) << "head " << h << " entry " << i;
    }
  }
  // Under kDrop the kept entries keep their own weight (0 here).
  LayerFixture plain(len, kvh, d);
  plain.FillRandom(6);
  LayerCompressor dropping(backend, dynamic_cast<const ScoringPolicy&>(*p), 1);
  ASSERT_TRUE(
      dropping.Compress(plain.Request(window, window_len, kvh * group, wo, k), plain.pool, plain.seq, 0, &stats).ok());
  for (int64_t i = 0; i < k; ++i) EXPECT_EQ(plain.layer().LogWeight(i, 0), 0.0f);
}

}  // namespace
}  // namespace kvserve
