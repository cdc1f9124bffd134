#include "kernels/cpu/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tests/kernels/cpu/random_blocks.h"

namespace kvserve::cpu {
namespace {

using kvserve::testing::RandomFloats;
using kvserve::testing::RandomQuantRows;

float MaxAbs(const std::vector<float>& v) {
  float m = 0;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

struct Case {
  DType type;
  int64_t n_tokens;
};

class MatMulTest : public ::testing::TestWithParam<Case> {};

TEST_P(MatMulTest, MatchesReference) {
  const auto [type, n] = GetParam();
  const int64_t rows = 96, cols = 320;
  std::vector<uint8_t> wq;
  std::vector<float> wf;
  WeightView w{type, rows, cols, nullptr};
  if (type == DType::kF32) {
    wf = RandomFloats(rows * cols, 3, 0.1f);
    w.data = wf.data();
  } else {
    wq = RandomQuantRows(type, rows, cols, 3);
    w.data = wq.data();
  }
  auto x = RandomFloats(n * cols, 4, 1.0f);
  std::vector<float> y(n * rows), ref(n * rows);
  MatMul(w, x.data(), y.data(), n);
  MatMulReference(w, x.data(), ref.data(), n);
  // Quantized activations cost ~1%; the BLAS path is fp32-exact up to rounding.
  const bool quantized_path = type != DType::kF32 && n < kQuantDotMaxTokens;
  const float tol = (quantized_path ? 1e-2f : 1e-5f) * MaxAbs(ref) + 1e-6f;
  for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], ref[i], tol) << "at " << i;
}

INSTANTIATE_TEST_SUITE_P(
    TypesAndTokenCounts, MatMulTest,
    ::testing::Values(Case{DType::kF32, 1}, Case{DType::kF32, 17}, Case{DType::kQ4_1, 1},
                      Case{DType::kQ4_1, 3}, Case{DType::kQ4_1, 40}, Case{DType::kQ8_0, 1},
                      Case{DType::kQ8_0, 33}, Case{DType::kQ4_0, 2}, Case{DType::kQ4_0, 9}),
    [](const auto& info) {
      return std::string(DTypeName(info.param.type)) + "_n" + std::to_string(info.param.n_tokens);
    });

}  // namespace
}  // namespace kvserve::cpu
