// The compressibility estimate: its response spectrum equals the covariance of explicitly
// computed response profiles, and it tells keys confined to a few directions (easy to
// compress) from keys spread in every direction (hard).
#include "engine/compress/compressibility.h"

#include <cmath>
#include <random>

#include "engine/compress/symmetric_eigen.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "tests/engine/compress/layer_fixture.h"

namespace kvserve {
namespace {

TEST(CompressibilityTest, ResponseSpectrumEqualsTheCovarianceOfExplicitProfiles) {
  const int64_t n = 200, d = 8, rows = 5;
  std::mt19937 rng(4);
  std::normal_distribution<float> g;
  std::vector<float> k(static_cast<size_t>(n * d)), q(static_cast<size_t>(rows * d));
  for (float& x : k) x = g(rng);
  for (float& x : q) x = g(rng);
  const float scale = 0.5f;
  // Reference: r_j = scale * Q k_j, then the [rows, rows] covariance and its eigenvalues.
  std::vector<double> r(static_cast<size_t>(n * rows)), mean(rows, 0.0), cov_r(rows * rows, 0.0);
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < rows; ++i) {
      double dot = 0;
      for (int64_t a = 0; a < d; ++a) dot += static_cast<double>(q[i * d + a]) * k[j * d + a];
      r[j * rows + i] = scale * dot;
      mean[i] += r[j * rows + i] / n;
    }
  }
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t a = 0; a < rows; ++a) {
      for (int64_t b = 0; b < rows; ++b) cov_r[a * rows + b] += (r[j * rows + a] - mean[a]) * (r[j * rows + b] - mean[b]) / n;
    }
  }
  const std::vector<double> want = EigenSymmetric(cov_r, rows).values;
  std::vector<double> kmean(d, 0.0), cov_k(d * d, 0.0);
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t a = 0; a < d; ++a) kmean[a] += k[j * d + a] / static_cast<double>(n);
  }
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t a = 0; a < d; ++a) {
      for (int64_t b = 0; b < d; ++b) cov_k[a * d + b] += (k[j * d + a] - kmean[a]) * (k[j * d + b] - kmean[b]) / n;
    }
  }
  const std::vector<double> got = ResponseSpectrum(cov_k, q.data(), rows, d, scale);
  for (int64_t i = 0; i < rows; ++i) EXPECT_NEAR(got[i], want[i], 1e-6 * want[0]) << i;
  for (int64_t i = rows; i < d; ++i) EXPECT_NEAR(got[i], 0.0, 1e-6 * want[0]) << i;
}

TEST(CompressibilityTest, SeparatesKeysInFewDirectionsFromKeysInAll) {
  const int64_t n = 256, heads = 1, d = 32, n_heads = 2, w = 16;
  auto backend = MakeCpuBackend();
  auto estimate = [&](int64_t rank) {
    LayerFixture f(n, heads, d);
    std::mt19937 rng(6);
    std::normal_distribution<float> g;
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t a = 0; a < d; ++a) {
        f.k[j * d + a] = a < rank ? g(rng) : 0.0f;
        // Values alike: copies of `rank` distinct vectors; values spread: a draw each.
        f.v[j * d + a] = rank < d ? static_cast<float>((j % rank) * (a + 1) % 7) : g(rng);
      }
    }
    f.Store();
    CompressibilityEstimator est(1, heads, d);
    est.AddEntries(f.layer(), 0, 0, n / 2, *backend);  // in two steps, as prefill chunks
    est.AddEntries(f.layer(), 0, n / 2, n - n / 2, *backend);
    QueryWindow window(1, w, n_heads, d);
    std::vector<float> q(static_cast<size_t>(w * n_heads * d));
    for (float& x : q) x = g(rng);
    window.Append(0, q.data(), w);
    est.AddQueries(window, 0, w, n_heads, *backend);
    return est.Estimate(1.0f / std::sqrt(static_cast<float>(d)));
  };
  const CompressibilityEstimate easy = estimate(2), hard = estimate(32);
  ASSERT_EQ(easy.layers.size(), 1u);
  EXPECT_LE(easy.mean.effective_rank, 2.0 + 1e-6);
  EXPECT_NEAR(easy.mean.spectral_tail, 0.0, 1e-6);
  EXPECT_GT(hard.mean.effective_rank, 8.0);
  EXPECT_GT(hard.mean.spectral_tail, 0.3);
  // Two distinct values are covered by any 64 of 256 entries; spread values are not.
  EXPECT_LT(easy.RiskAt(64), 1e-9);
  EXPECT_GT(hard.RiskAt(64), 0.2);
  EXPECT_EQ(hard.RiskAt(256), 0.0);  // every entry kept
}

}  // namespace
}  // namespace kvserve
