// The Jacobi eigen-solver against matrices built from a known spectrum.
#include "engine/compress/symmetric_eigen.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "gtest/gtest.h"

namespace kvserve {
namespace {

// A random orthogonal Q (Gram-Schmidt on Gaussian columns), row-major [n, n].
std::vector<double> RandomOrthogonal(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> g;
  std::vector<double> q(static_cast<size_t>(n * n));
  for (double& x : q) x = g(rng);
  for (int64_t c = 0; c < n; ++c) {
    for (int64_t p = 0; p < c; ++p) {
      double dot = 0;
      for (int64_t r = 0; r < n; ++r) dot += q[r * n + c] * q[r * n + p];
      for (int64_t r = 0; r < n; ++r) q[r * n + c] -= dot * q[r * n + p];
    }
    double norm = 0;
    for (int64_t r = 0; r < n; ++r) norm += q[r * n + c] * q[r * n + c];
    for (int64_t r = 0; r < n; ++r) q[r * n + c] /= std::sqrt(norm);
  }
  return q;
}

TEST(SymmetricEigenTest, RecoversAKnownSpectrumAndVectors) {
  for (int64_t n : {1, 2, 5, 16, 64}) {
    const std::vector<double> q = RandomOrthogonal(n, static_cast<uint32_t>(n));
    std::vector<double> lambda(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) lambda[i] = std::pow(0.7, static_cast<double>(i)) * (i % 3 == 2 ? -1 : 1);
    std::vector<double> a(static_cast<size_t>(n * n), 0.0);
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t c = 0; c < n; ++c) {
        for (int64_t i = 0; i < n; ++i) a[r * n + c] += q[r * n + i] * lambda[i] * q[c * n + i];
      }
    }
    const SymmetricEigen e = EigenSymmetric(a, n);
    std::vector<double> sorted = lambda;
    std::sort(sorted.rbegin(), sorted.rend());
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_NEAR(e.values[i], sorted[i], 1e-10) << "n " << n << " value " << i;
      // A v = lambda v, |v| = 1.
      double norm = 0, resid = 0;
      for (int64_t r = 0; r < n; ++r) {
        double av = 0;
        for (int64_t c = 0; c < n; ++c) av += a[r * n + c] * e.vectors[c * n + i];
        resid += std::pow(av - e.values[i] * e.vectors[r * n + i], 2);
        norm += e.vectors[r * n + i] * e.vectors[r * n + i];
      }
      EXPECT_NEAR(norm, 1.0, 1e-10);
      EXPECT_LT(std::sqrt(resid), 1e-9) << "n " << n << " vector " << i;
    }
  }
}

}  // namespace
}  // namespace kvserve
