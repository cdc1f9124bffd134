// The CPU matmul kernels against a naive reference, over shapes and weight dtypes.
#include "kernels/cpu/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/kernel_table.h"
#include "tests/kernels/cpu/cpu_isas.h"
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
  std::vector<float> ref(n * rows);
  MatMulReference(w, x.data(), ref.data(), n);
  // Quantized activations cost ~1%; the BLAS path is fp32-exact up to rounding.
  for (CpuIsa isa : kvserve::testing::IsasThisCpuRuns()) {
    SCOPED_TRACE(kvserve::testing::IsaTrace(isa));
    ScopedCpuIsa use(isa);
    const bool quantized_path = type != DType::kF32 && n < QuantDotMaxTokens();
    const float tol = (quantized_path ? 1e-2f : 1e-5f) * MaxAbs(ref) + 1e-6f;
    std::vector<float> y(n * rows);
    MatMul(w, x.data(), y.data(), n);
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], ref[i], tol) << "at " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    TypesAndTokenCounts, MatMulTest,
    ::testing::Values(Case{DType::kF32, 1}, Case{DType::kF32, 17}, Case{DType::kQ4_1, 1},
                      Case{DType::kQ4_1, 3}, Case{DType::kQ4_1, 40}, Case{DType::kQ4_1, 70}, Case{DType::kQ8_0, 1},
                      Case{DType::kQ8_0, 33}, Case{DType::kQ4_0, 2}, Case{DType::kQ4_0, 9}),
    [](const auto& info) {
      return std::string(DTypeName(info.param.type)) + "_n" + std::to_string(info.param.n_tokens);
    });

// Weights sharing one input (q/k/v, gate/up) give exactly what separate products give, fused
// (same activation type) or not (a mix of quantized and f32 weights), for decode and prefill.
TEST(MatMulSharedTest, EqualsSeparateProducts) {
  const int64_t cols = 320;
  const auto q4 = RandomQuantRows(DType::kQ4_1, 96, cols, 5);
  const auto q4b = RandomQuantRows(DType::kQ4_1, 34, cols, 6);  // not a multiple of the task size
  const auto q8 = RandomQuantRows(DType::kQ8_0, 48, cols, 7);
  const auto f32 = RandomFloats(40 * cols, 8, 0.1f);
  const WeightView w4{DType::kQ4_1, 96, cols, q4.data()}, w4b{DType::kQ4_1, 34, cols, q4b.data()};
  const WeightView w8{DType::kQ8_0, 48, cols, q8.data()}, wf{DType::kF32, 40, cols, f32.data()};
  for (const std::vector<WeightView>& ws : {std::vector<WeightView>{w4, w4b, w4}, std::vector<WeightView>{w4, w8, wf}}) {
    for (int64_t n : {1, 3, 12}) {
      const auto x = RandomFloats(n * cols, 9);
      std::vector<std::vector<float>> got(ws.size()), want(ws.size());
      std::vector<float*> outs;
      for (size_t i = 0; i < ws.size(); ++i) {
        got[i].assign(n * ws[i].rows, -1.0f);
        want[i].assign(n * ws[i].rows, -2.0f);
        outs.push_back(got[i].data());
        MatMul(ws[i], x.data(), want[i].data(), n);
      }
      MatMulShared(ws.data(), outs.data(), static_cast<int64_t>(ws.size()), x.data(), n);
      for (size_t i = 0; i < ws.size(); ++i) EXPECT_EQ(got[i], want[i]) << "weight " << i << ", n " << n;
    }
  }
}

}  // namespace
}  // namespace kvserve::cpu
