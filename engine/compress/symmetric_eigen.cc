#include "engine/compress/symmetric_eigen.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kvserve {

SymmetricEigen EigenSymmetric(const std::vector<double>& a_in, int64_t n) {
  std::vector<double> a(static_cast<size_t>(n * n)), v(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) a[i * n + j] = 0.5 * (a_in[i * n + j] + a_in[j * n + i]);
    v[i * n + i] = 1.0;
  }
  auto off_norm = [&] {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = i + 1; j < n; ++j) s += a[i * n + j] * a[i * n + j];
    }
    return s;
  };
  double total = 0;
  for (double x : a) total += x * x;
  // Cyclic Jacobi converges quadratically; 50 sweeps is far past what n <= 256 needs.
  for (int sweep = 0; sweep < 50 && off_norm() > 1e-26 * std::max(total, 1e-300); ++sweep) {
    for (int64_t p = 0; p < n; ++p) {
      for (int64_t q = p + 1; q < n; ++q) {
        const double apq = a[p * n + q];
        if (std::fabs(apq) < 1e-300) continue;
        // The rotation that zeroes a[p][q] (Golub & Van Loan, Algorithm 8.4.1).
        const double tau = (a[q * n + q] - a[p * n + p]) / (2 * apq);
        const double t = (tau >= 0 ? 1.0 : -1.0) / (std::fabs(tau) + std::sqrt(1 + tau * tau));
        const double c = 1 / std::sqrt(1 + t * t), s = t * c;
        for (int64_t k = 0; k < n; ++k) {  // columns p and q
          const double akp = a[k * n + p], akq = a[k * n + q];
          a[k * n + p] = c * akp - s * akq;
          a[k * n + q] = s * akp + c * akq;
        }
        for (int64_t k = 0; k < n; ++k) {  // rows p and q
          const double apk = a[p * n + k], aqk = a[q * n + k];
          a[p * n + k] = c * apk - s * aqk;
          a[q * n + k] = s * apk + c * aqk;
        }
        for (int64_t k = 0; k < n; ++k) {
          const double vkp = v[k * n + p], vkq = v[k * n + q];
          v[k * n + p] = c * vkp - s * vkq;
          v[k * n + q] = s * vkp + c * vkq;
        }
      }
    }
  }
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return a[x * n + x] > a[y * n + y]; });
  SymmetricEigen out;
  out.values.resize(static_cast<size_t>(n));
  out.vectors.resize(static_cast<size_t>(n * n));
  for (int64_t i = 0; i < n; ++i) {
    out.values[i] = a[order[i] * n + order[i]];
    for (int64_t k = 0; k < n; ++k) out.vectors[k * n + i] = v[k * n + order[i]];
  }
  return out;
}

}  // namespace kvserve
