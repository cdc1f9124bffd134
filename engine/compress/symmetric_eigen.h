// Eigen-decomposition of a small symmetric matrix (cyclic Jacobi), for the principal
// directions merge-reduce protects. LAPACK is not linked; n here is a head_dim (<= 256).
#pragma once
#include <cstdint>
#include <vector>

namespace kvserve {

struct SymmetricEigen {
  std::vector<double> values;   // [n], descending
  std::vector<double> vectors;  // [n, n] row-major; column i is the unit eigenvector of values[i]
};

// a [n, n] row-major, symmetric (only read as given; asymmetry is averaged away).
SymmetricEigen EigenSymmetric(const std::vector<double>& a, int64_t n);

}  // namespace kvserve
