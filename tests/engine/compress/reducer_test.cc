// The two REDUCE steps: weighted random sampling is unbiased and reproducible; balanced
// clustering keeps the weighted mean of the protected-direction features.
#include <cmath>
#include <limits>
#include <random>

#include "engine/compress/cluster_reducer.h"
#include "engine/compress/random_sample_reducer.h"
#include "gtest/gtest.h"
#include "tests/engine/compress/layer_fixture.h"

namespace kvserve {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<WeightedEntry> AllEntries(const LayerKv& L, int64_t h) {
  std::vector<WeightedEntry> out;
  for (int64_t s = 0; s < L.len; ++s) out.push_back({static_cast<int32_t>(s), L.LogWeight(s, h)});
  return out;
}

// Weighted attention of one query over entries of head h (reference, double precision):
// numerator [d], denominator, output = numerator / denominator.
struct Attn {
  std::vector<double> num;
  double den = 0;
  std::vector<double> Out() const {
    std::vector<double> o = num;
    for (double& x : o) x /= den;
    return o;
  }
};
Attn Attend(const LayerKv& L, int64_t h, const std::vector<float>& q, absl::Span<const WeightedEntry> entries) {
  const int64_t d = L.kv.head_dim;
  Attn a;
  a.num.assign(static_cast<size_t>(d), 0.0);
  for (const WeightedEntry& e : entries) {
    if (!std::isfinite(e.log_w)) continue;
    double logit = e.log_w;
    for (int64_t i = 0; i < d; ++i) logit += static_cast<double>(q[i]) * L.Key(e.slot, h)[i] / std::sqrt(double(d));
    const double p = std::exp(logit);
    a.den += p;
    for (int64_t i = 0; i < d; ++i) a.num[i] += p * L.Value(e.slot, h)[i];
  }
  return a;
}

double TotalWeight(absl::Span<const WeightedEntry> entries) {
  double t = 0;
  for (const WeightedEntry& e : entries) t += std::exp(static_cast<double>(e.log_w));
  return t;
}

TEST(RandomSampleReducerTest, MeanOfSeededReductionsApproachesTheFullAttention) {
  LayerFixture f(32, 2, 8);
  f.FillRandom(3);
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& x : f.log_w) x = u(rng);
  f.Store();
  const LayerKv L = f.layer();
  const std::vector<float> q = {0.9f, -0.4f, 0.3f, 1.1f, -0.8f, 0.2f, 0.5f, -0.1f};
  RandomSampleReducer reducer;
  const int64_t k = 16, trials = 4000;
  for (int64_t h = 0; h < 2; ++h) {
    const std::vector<WeightedEntry> all = AllEntries(L, h);
    const Attn full = Attend(L, h, q, all);
    const std::vector<double> full_out = full.Out();
    double den_sum = 0, den_sq = 0;
    std::vector<double> num_sum(8, 0.0), out_sum(8, 0.0);
    for (int64_t t = 0; t < trials; ++t) {
      const std::vector<WeightedEntry> kept = reducer.Reduce(L, h, all, k, MixSeed(7, t, h));
      ASSERT_LE(static_cast<int64_t>(kept.size()), k);
      // Duplicates come back merged and the total weight is kept exactly.
      for (size_t i = 1; i < kept.size(); ++i) ASSERT_LT(kept[i - 1].slot, kept[i].slot);
      ASSERT_NEAR(TotalWeight(kept), TotalWeight(all), 1e-4 * TotalWeight(all));
      const Attn a = Attend(L, h, q, kept);
      den_sum += a.den;
      den_sq += a.den * a.den;
      const std::vector<double> o = a.Out();
      for (int i = 0; i < 8; ++i) {
        num_sum[i] += a.num[i];
        out_sum[i] += o[i];
      }
    }
    // Numerator and denominator are unbiased: their means sit within 4 standard errors.
    const double den_mean = den_sum / trials, den_se = std::sqrt((den_sq / trials - den_mean * den_mean) / trials);
    EXPECT_NEAR(den_mean, full.den, 4 * den_se + 1e-9) << "head " << h;
    for (int i = 0; i < 8; ++i) {
      EXPECT_NEAR(num_sum[i] / trials, full.num[i], 0.02 * full.den) << "head " << h << " dim " << i;
      // The output (a ratio) is unbiased to O(1/k); its mean is close to the full output.
      EXPECT_NEAR(out_sum[i] / trials, full_out[i], 0.03) << "head " << h << " dim " << i;
    }
  }
}

TEST(RandomSampleReducerTest, SeededAndReproducibleAndSkipsZeroWeights) {
  LayerFixture f(20, 1, 4);
  f.FillRandom(1);
  for (int64_t s = 0; s < 20; s += 2) f.log_w[s] = -kInf;
  f.Store();
  const LayerKv L = f.layer();
  const std::vector<WeightedEntry> all = AllEntries(L, 0);
  RandomSampleReducer reducer;
  const auto a = reducer.Reduce(L, 0, all, 6, 42), b = reducer.Reduce(L, 0, all, 6, 42);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].slot, b[i].slot);
    EXPECT_EQ(a[i].log_w, b[i].log_w);
    EXPECT_EQ(a[i].slot % 2, 1) << "a zero-weight entry was drawn";
  }
  bool differs = false;
  for (uint64_t seed = 43; seed < 53 && !differs; ++seed) {
    const auto c = reducer.Reduce(L, 0, all, 6, seed);
    differs = c.size() != a.size();
    for (size_t i = 0; !differs && i < c.size(); ++i) differs = c[i].slot != a[i].slot || c[i].log_w != a[i].log_w;
  }
  EXPECT_TRUE(differs);
}

// Projected weighted-mean error |U^T (sum_c W_c x_rep(c) - sum_j w_j x_j)| / W.
double MeanError(const ClusterReduction& r, const std::vector<float>& x, const std::vector<double>& w, int64_t d,
                 int64_t m, const std::vector<int32_t>& reps) {
  std::vector<double> diff(static_cast<size_t>(d), 0.0);
  double total = 0;
  for (size_t j = 0; j < w.size(); ++j) {
    total += w[j];
    for (int64_t a = 0; a < d; ++a) diff[a] -= w[j] * x[j * d + a];
  }
  for (size_t c = 0; c < reps.size(); ++c) {
    for (int64_t a = 0; a < d; ++a) diff[a] += r.cluster_weight[c] * x[reps[c] * d + a];
  }
  double e2 = 0;
  for (int64_t b = 0; b < m; ++b) {
    double p = 0;
    for (int64_t a = 0; a < d; ++a) p += diff[a] * r.basis[a * m + b];
    e2 += p * p;
  }
  return std::sqrt(e2) / total;
}

TEST(ClusterReducerTest, KeepsTheWeightedMeanOfProtectedDirections) {
  const int64_t n = 96, d = 16;
  std::mt19937 rng(5);
  std::normal_distribution<float> g;
  std::uniform_real_distribution<double> uw(0.2, 3.0);
  std::vector<float> x(static_cast<size_t>(n * d));
  std::vector<double> w(static_cast<size_t>(n));
  // Anisotropic features: dimension a has scale 3 / (1 + a).
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t a = 0; a < d; ++a) x[j * d + a] = g(rng) * 3.0f / static_cast<float>(1 + a);
    w[j] = uw(rng);
  }
  for (int64_t m : {2, 4, 16}) {
    for (int64_t k : {48, 24, 12}) {
      const ClusterReduction r = BalancedClusterReduce(x.data(), w.data(), n, d, m, k);
      // Balanced: every cluster has n/k members; each keeps one of its own with its total weight.
      std::vector<int64_t> size(static_cast<size_t>(k), 0);
      for (int32_t c : r.cluster) ++size[c];
      double total = 0, carried = 0;
      for (int64_t c = 0; c < k; ++c) {
        EXPECT_EQ(size[c], n / k) << "m " << m << " k " << k;
        EXPECT_EQ(r.cluster[r.representative[c]], c);
        carried += r.cluster_weight[c];
      }
      for (double v : w) total += v;
      EXPECT_NEAR(carried, total, 1e-9 * total);
      // The protected mean is kept within 5% of the features' spread along the top direction
      // (3), within 1% when few directions are protected, and far closer than keeping each
      // cluster's heaviest member. (Exact is out of reach: each cluster can only offer the
      // offsets of its own members.)
      std::vector<int32_t> heaviest(static_cast<size_t>(k), -1);
      for (int64_t j = 0; j < n; ++j) {
        int32_t& h = heaviest[r.cluster[j]];
        if (h < 0 || w[j] > w[h]) h = static_cast<int32_t>(j);
      }
      const double err = MeanError(r, x, w, d, std::min(m, d), r.representative);
      const double baseline = MeanError(r, x, w, d, std::min(m, d), heaviest);
      EXPECT_LT(err, (m <= 4 ? 0.01 : 0.05) * 3.0) << "m " << m << " k " << k;
      EXPECT_LT(err, 0.5 * baseline) << "m " << m << " k " << k;
    }
  }
}

TEST(ClusterReducerTest, ProtectedDirectionsAreTheTopPrincipalOnes) {
  // Features spread along e0 and e1 only (plus a little noise): with m = 2 the basis spans them.
  const int64_t n = 64, d = 8;
  std::mt19937 rng(2);
  std::normal_distribution<float> g;
  std::vector<float> x(static_cast<size_t>(n * d));
  std::vector<double> w(static_cast<size_t>(n), 1.0);
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t a = 0; a < d; ++a) x[j * d + a] = g(rng) * (a == 0 ? 5.0f : a == 1 ? 3.0f : 0.01f);
  }
  const ClusterReduction r = BalancedClusterReduce(x.data(), w.data(), n, d, 2, 8);
  for (int64_t b = 0; b < 2; ++b) {
    double in_plane = 0;
    for (int64_t a = 0; a < 2; ++a) in_plane += r.basis[a * 2 + b] * r.basis[a * 2 + b];
    EXPECT_NEAR(in_plane, 1.0, 1e-4) << "direction " << b;
  }
}

TEST(ClusterReducerTest, ReducerKeepsKLiveEntriesWithTheBucketsWeight) {
  LayerFixture f(40, 2, 8);
  f.FillRandom(4);
  for (int64_t s = 0; s < 40; s += 5) f.log_w[s * 2 + 1] = -kInf;  // head 1 has zero-weight padding
  f.Store();
  const LayerKv L = f.layer();
  ClusterReducer reducer(4);
  for (int64_t h = 0; h < 2; ++h) {
    const std::vector<WeightedEntry> all = AllEntries(L, h);
    const std::vector<WeightedEntry> kept = reducer.Reduce(L, h, all, 10, 0);
    ASSERT_EQ(kept.size(), 10u);
    for (size_t i = 0; i < kept.size(); ++i) {
      EXPECT_TRUE(std::isfinite(kept[i].log_w));
      if (i > 0) {
        EXPECT_LT(kept[i - 1].slot, kept[i].slot);
      }
    }
    EXPECT_NEAR(TotalWeight(kept), TotalWeight(all), 1e-4 * TotalWeight(all));
  }
}

}  // namespace
}  // namespace kvserve
