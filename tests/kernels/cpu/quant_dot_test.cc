// Quantized dot products: SIMD against scalar, and against the float dot of dequantized rows.
#include "kernels/cpu/quant_dot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/dequantize.h"
#include "tests/kernels/cpu/random_blocks.h"

namespace kvserve::cpu {
namespace {

using kvserve::testing::RandomFloats;
using kvserve::testing::RandomQuantRows;

class QuantDotTest : public ::testing::TestWithParam<DType> {};

TEST_P(QuantDotTest, SimdEqualsScalarReference) {
  const DType w = GetParam();
  for (int64_t n : {32, 64, 576, 1536}) {
    auto row = RandomQuantRows(w, 1, n, static_cast<uint32_t>(n));
    auto x = RandomFloats(n, 7 + static_cast<uint32_t>(n), 3.0f);
    std::vector<uint8_t> act(RowBytes(ActivationTypeFor(w), n));
    if (ActivationTypeFor(w) == DType::kQ8_1) QuantizeRowQ8_1(x.data(), act.data(), n);
    else QuantizeRowQ8_0(x.data(), act.data(), n);
    const float simd = QuantDot(w, row.data(), act.data(), n);
    const float ref = QuantDotReference(w, row.data(), act.data(), n);
    EXPECT_NEAR(simd, ref, 1e-4f * (1.0f + std::fabs(ref))) << DTypeName(w) << " n=" << n;
  }
}

TEST_P(QuantDotTest, CloseToFloatDotOfDequantizedRow) {
  // Quantizing the activations to 8 bits costs at most ~1% of the magnitude of the terms.
  const DType w = GetParam();
  const int64_t n = 1024;
  auto row = RandomQuantRows(w, 1, n, 11);
  auto x = RandomFloats(n, 12, 2.0f);
  std::vector<float> wf(n);
  DequantizeRow(w, row.data(), wf.data(), n);
  double exact = 0, magnitude = 0;
  for (int64_t i = 0; i < n; ++i) {
    exact += static_cast<double>(wf[i]) * x[i];
    magnitude += std::fabs(static_cast<double>(wf[i]) * x[i]);
  }
  std::vector<uint8_t> act(RowBytes(ActivationTypeFor(w), n));
  if (ActivationTypeFor(w) == DType::kQ8_1) QuantizeRowQ8_1(x.data(), act.data(), n);
  else QuantizeRowQ8_0(x.data(), act.data(), n);
  EXPECT_NEAR(QuantDot(w, row.data(), act.data(), n), exact, 0.01 * magnitude);
}

TEST_P(QuantDotTest, RowsKernelEqualsOneRowAtATime) {
  const DType w = GetParam();
  const int64_t n = 576, rows = 7;  // odd: the paired Q4_1 loop must handle a leftover row
  auto weights = RandomQuantRows(w, rows, n, 21);
  auto x = RandomFloats(n, 22, 2.0f);
  std::vector<uint8_t> act(RowBytes(ActivationTypeFor(w), n));
  if (ActivationTypeFor(w) == DType::kQ8_1) QuantizeRowQ8_1(x.data(), act.data(), n);
  else QuantizeRowQ8_0(x.data(), act.data(), n);
  std::vector<float> out(rows * 3, -1.0f);
  QuantDotRows(w, weights.data(), RowBytes(w, n), rows, act.data(), n, out.data(), 3);
  for (int64_t r = 0; r < rows; ++r) {
    const float one = QuantDotReference(w, weights.data() + r * RowBytes(w, n), act.data(), n);
    EXPECT_NEAR(out[r * 3], one, 1e-4f * (1.0f + std::fabs(one))) << "row " << r;
    EXPECT_EQ(out[r * 3 + 1], -1.0f);  // the stride is respected
  }
}

INSTANTIATE_TEST_SUITE_P(Types, QuantDotTest,
                         ::testing::Values(DType::kQ4_1, DType::kQ4_0, DType::kQ8_0),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

TEST(QuantizeQ8, ScaleMapsLargestMagnitudeTo127) {
  std::vector<float> x(32, 0.5f);
  x[3] = -2.54f;
  std::vector<uint8_t> blk(RowBytes(DType::kQ8_0, 32));
  QuantizeRowQ8_0(x.data(), blk.data(), 32);
  const auto* b = reinterpret_cast<const BlockQ8_0*>(blk.data());
  EXPECT_EQ(b->qs[3], -127);
  EXPECT_EQ(b->qs[0], 25);  // 0.5 / (2.54 / 127) = 25
  EXPECT_NEAR(HalfToFloat(b->d), 0.02f, 1e-4f);
}

}  // namespace
}  // namespace kvserve::cpu
