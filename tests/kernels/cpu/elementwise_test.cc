// RMSNorm, RoPE and SwiGLU against formulas written out in the test.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "tests/kernels/cpu/random_blocks.h"

namespace kvserve::cpu {
namespace {

TEST(RmsNorm, NormalizesEachRowAndAppliesGain) {
  const int64_t n = 3, dim = 7;
  auto x = kvserve::testing::RandomFloats(n * dim, 1, 4.0f);
  auto gain = kvserve::testing::RandomFloats(dim, 2);
  std::vector<float> out(n * dim);
  RmsNorm(x.data(), gain.data(), out.data(), n, dim, 1e-5f);
  for (int64_t t = 0; t < n; ++t) {
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += x[t * dim + i] * x[t * dim + i];
    const double inv = 1.0 / std::sqrt(ss / dim + 1e-5);
    for (int64_t i = 0; i < dim; ++i) EXPECT_NEAR(out[t * dim + i], x[t * dim + i] * inv * gain[i], 1e-5);
  }
}

TEST(Rope, AdjacentAndNeoxPairingsAgreeUpToPermutation) {
  // GGUF llama rows are the HF rows permuted so that pair (i, i+half) becomes (2i, 2i+1):
  // rotating either layout must give the same numbers in the matching places.
  const int64_t hd = 16, half = hd / 2, heads = 2, n = 3;
  std::vector<float> inv(half);
  for (int64_t i = 0; i < half; ++i) inv[i] = std::pow(10000.0f, -2.0f * i / hd);
  auto neox = kvserve::testing::RandomFloats(n * heads * hd, 3);
  std::vector<float> adj(neox.size());
  for (int64_t r = 0; r < n * heads; ++r) {
    for (int64_t i = 0; i < half; ++i) {
      adj[r * hd + 2 * i] = neox[r * hd + i];
      adj[r * hd + 2 * i + 1] = neox[r * hd + i + half];
    }
  }
  const std::vector<int32_t> pos = {0, 7, 4095};
  Rope(neox.data(), pos.data(), n, heads, hd, inv.data(), hd, true);
  Rope(adj.data(), pos.data(), n, heads, hd, inv.data(), hd, false);
  for (int64_t r = 0; r < n * heads; ++r) {
    for (int64_t i = 0; i < half; ++i) {
      EXPECT_FLOAT_EQ(adj[r * hd + 2 * i], neox[r * hd + i]);
      EXPECT_FLOAT_EQ(adj[r * hd + 2 * i + 1], neox[r * hd + i + half]);
    }
  }
}

TEST(Rope, PositionZeroIsIdentityAndNormIsKept) {
  const int64_t hd = 8;
  std::vector<float> inv = {1.0f, 0.1f, 0.01f, 0.001f};
  auto x = kvserve::testing::RandomFloats(2 * hd, 4);
  auto y = x;
  const std::vector<int32_t> pos = {0, 1000};
  Rope(y.data(), pos.data(), 2, 1, hd, inv.data(), hd, false);
  for (int64_t i = 0; i < hd; ++i) EXPECT_FLOAT_EQ(y[i], x[i]);
  double nx = 0, ny = 0;
  for (int64_t i = hd; i < 2 * hd; ++i) nx += x[i] * x[i], ny += y[i] * y[i];
  EXPECT_NEAR(nx, ny, 1e-5);
  EXPECT_GT(std::fabs(y[hd] - x[hd]), 1e-3);  // it did rotate
}

TEST(SwiGlu, IsSiluOfGateTimesUp) {
  const std::vector<float> g = {-3.0f, 0.0f, 1.5f}, u = {2.0f, 5.0f, -1.0f};
  std::vector<float> out(3);
  SwiGlu(g.data(), u.data(), out.data(), 3);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(out[i], g[i] / (1 + std::exp(-g[i])) * u[i], 1e-6);
}

}  // namespace
}  // namespace kvserve::cpu
