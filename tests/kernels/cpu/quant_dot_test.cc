// Quantized dot products: SIMD against scalar, and against the float dot of dequantized rows.
#include "kernels/cpu/quant_dot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cpu/dequantize.h"
#include "kernels/cpu/kernel_table.h"
#include "tests/kernels/cpu/random_blocks.h"

namespace kvserve::cpu {
namespace {

using kvserve::testing::RandomFloats;
using kvserve::testing::RandomQuantRows;

// Activations for a dot with weights of type w: x quantized to ActivationTypeFor(w).
std::vector<uint8_t> QuantizedActivations(DType w, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> act(RowBytes(ActivationTypeFor(w), n));
  if (ActivationTypeFor(w) == DType::kQ8_1) QuantizeRowQ8_1(x.data(), act.data(), n);
  else QuantizeRowQ8_0(x.data(), act.data(), n);
  return act;
}

// `tokens` activation rows of n elements for weights of type w, one after another; token t's
// floats drawn with seed first_seed + t.
std::vector<uint8_t> TokenActivations(DType w, int64_t n, int64_t tokens, uint32_t first_seed) {
  std::vector<uint8_t> acts;
  for (int64_t t = 0; t < tokens; ++t) {
    const auto act = QuantizedActivations(w, RandomFloats(n, first_seed + static_cast<uint32_t>(t), 2.0f));
    acts.insert(acts.end(), act.begin(), act.end());
  }
  return acts;
}

// Every ISA's kernels (the ones this CPU can run) for every weight type.
class QuantDotTest : public ::testing::TestWithParam<std::tuple<CpuIsa, DType>> {
 protected:
  void SetUp() override {
    if (!CpuSupports(isa())) GTEST_SKIP() << "this CPU cannot run " << CpuIsaName(isa());
  }
  CpuIsa isa() const { return std::get<0>(GetParam()); }
  DType type() const { return std::get<1>(GetParam()); }
  const CpuKernels& kernels() const { return KernelsFor(isa()); }
};

TEST_P(QuantDotTest, SimdEqualsScalarReference) {
  const DType w = type();
  // 1, 2, 3 and 5 blocks: the AVX-512 kernels take blocks in pairs, so odd counts have a tail.
  for (int64_t n : {32, 64, 96, 160, 576, 1536}) {
    auto row = RandomQuantRows(w, 1, n, static_cast<uint32_t>(n));
    const auto act = QuantizedActivations(w, RandomFloats(n, 7 + static_cast<uint32_t>(n), 3.0f));
    const float simd = kernels().quant_dot(w, row.data(), act.data(), n);
    const float ref = QuantDotReference(w, row.data(), act.data(), n);
    EXPECT_NEAR(simd, ref, 1e-4f * (1.0f + std::fabs(ref))) << DTypeName(w) << " n=" << n;
  }
}

TEST_P(QuantDotTest, CloseToFloatDotOfDequantizedRow) {
  // Quantizing the activations to 8 bits costs at most ~1% of the magnitude of the terms.
  const DType w = type();
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
  const auto act = QuantizedActivations(w, x);
  EXPECT_NEAR(kernels().quant_dot(w, row.data(), act.data(), n), exact, 0.01 * magnitude);
}

TEST_P(QuantDotTest, RowsKernelEqualsReferenceRowByRow) {
  const DType w = type();
  // Row counts around the kernels' groups of 4 and 2 rows, and block counts odd and even.
  for (int64_t n : {96, 576}) {
    for (int64_t rows : {1, 2, 3, 4, 5, 7, 9, 16}) {
      auto weights = RandomQuantRows(w, rows, n, 21 + static_cast<uint32_t>(rows));
      const auto act = QuantizedActivations(w, RandomFloats(n, 22, 2.0f));
      std::vector<float> out(rows * 3, -1.0f);
      kernels().quant_dot_rows(w, weights.data(), RowBytes(w, n), rows, act.data(), n, out.data(), 3);
      for (int64_t r = 0; r < rows; ++r) {
        const float one = QuantDotReference(w, weights.data() + r * RowBytes(w, n), act.data(), n);
        EXPECT_NEAR(out[r * 3], one, 1e-4f * (1.0f + std::fabs(one))) << "n " << n << " rows " << rows << " row " << r;
        EXPECT_EQ(out[r * 3 + 1], -1.0f);  // the stride is respected
        EXPECT_EQ(out[r * 3 + 2], -1.0f);
      }
    }
  }
}

TEST_P(QuantDotTest, RowsKernelGivesEachRowTheBitsOfItsOneRowDot) {
  // --deterministic relies on a row's result not depending on which rows share its call.
  const DType w = type();
  const int64_t n = 160, rows = 7;
  auto weights = RandomQuantRows(w, rows, n, 31);
  const auto act = QuantizedActivations(w, RandomFloats(n, 32, 2.0f));
  std::vector<float> out(rows);
  kernels().quant_dot_rows(w, weights.data(), RowBytes(w, n), rows, act.data(), n, out.data(), 1);
  for (int64_t r = 0; r < rows; ++r) {
    float alone;
    kernels().quant_dot_rows(w, weights.data() + r * RowBytes(w, n), RowBytes(w, n), 1, act.data(), n, &alone, 1);
    EXPECT_EQ(out[r], alone) << "row " << r;
  }
}

TEST_P(QuantDotTest, TokensKernelGivesEachTokenTheBitsOfItsOneTokenDot) {
  // A batch of decodes goes through quant_dot_rows_tokens (weights unpacked once for all
  // tokens); each (row, token) must equal the one-token kernel bit for bit, so a request's
  // output does not depend on what else is batched with it, and stay near the reference.
  const DType w = type();
  const DType a_type = ActivationTypeFor(w);
  for (int64_t n : {96, 576})
  for (int64_t rows : {1, 2, 3, 16})
  for (int64_t tokens : {1, 2, 3, 4, 5, 7, 8, 9, 17}) {
    auto weights = RandomQuantRows(w, rows, n, 41 + static_cast<uint32_t>(rows));
    const int64_t act_bytes = RowBytes(a_type, n);
    const auto acts = TokenActivations(w, n, tokens, 42);
    const int64_t stride = rows + 2;
    std::vector<float> out(tokens * stride, -1.0f);
    kernels().quant_dot_rows_tokens(w, weights.data(), RowBytes(w, n), rows, acts.data(), act_bytes, tokens, n,
                                    out.data(), stride);
    for (int64_t t = 0; t < tokens; ++t) {
      std::vector<float> alone(rows);
      kernels().quant_dot_rows(w, weights.data(), RowBytes(w, n), rows, acts.data() + t * act_bytes, n, alone.data(), 1);
      for (int64_t r = 0; r < rows; ++r) {
        EXPECT_EQ(out[t * stride + r], alone[r]) << "n " << n << " rows " << rows << " tokens " << tokens << " token " << t << " row " << r;
        const float ref = QuantDotReference(w, weights.data() + r * RowBytes(w, n), acts.data() + t * act_bytes, n);
        EXPECT_NEAR(out[t * stride + r], ref, 1e-4f * (1.0f + std::fabs(ref)));
      }
      EXPECT_EQ(out[t * stride + rows], -1.0f) << "wrote past the rows";
    }
  }
}

TEST_P(QuantDotTest, TileKernelEqualsReferenceForEveryRowAndToken) {
  // The row-tile kernel (16 rows transposed, batched decodes) where the ISA has one: near the
  // scalar reference for row counts around its 16-row tiles (the rest go to the row-major
  // kernel), token counts around its groups of 8, odd and even block counts; the output stride
  // respected.
  const CpuKernels& k = kernels();
  if (k.quant_dot_tile_tokens == nullptr) GTEST_SKIP() << CpuIsaName(isa()) << " has no row-tile kernel";
  const DType w = type();
  const DType a_type = ActivationTypeFor(w);
  for (int64_t n : {96, 576, 1536})
  for (int64_t rows : {3, 16, 17, 32, 45})
  for (int64_t tokens : {1, 2, 4, 7, 8, 9, 16, 33}) {
    auto weights = RandomQuantRows(w, rows, n, 51 + static_cast<uint32_t>(rows));
    const int64_t act_bytes = RowBytes(a_type, n);
    const auto acts = TokenActivations(w, n, tokens, 52);
    const int64_t stride = rows + 2;
    std::vector<float> out(tokens * stride, -1.0f);
    k.quant_dot_tile_tokens(w, weights.data(), RowBytes(w, n), rows, acts.data(), act_bytes, tokens, n, out.data(),
                            stride);
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t r = 0; r < rows; ++r) {
        const float ref = QuantDotReference(w, weights.data() + r * RowBytes(w, n), acts.data() + t * act_bytes, n);
        ASSERT_NEAR(out[t * stride + r], ref, 1e-4f * (1.0f + std::fabs(ref)))
            << "n " << n << " rows " << rows << " tokens " << tokens << " token " << t << " row " << r;
      }
      ASSERT_EQ(out[t * stride + rows], -1.0f) << "wrote past the rows";
      ASSERT_EQ(out[t * stride + rows + 1], -1.0f) << "wrote past the rows";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(IsasAndTypes, QuantDotTest,
                         ::testing::Combine(::testing::ValuesIn(kAllCpuIsas),
                                            ::testing::Values(DType::kQ4_1, DType::kQ4_0, DType::kQ8_0)),
                         [](const auto& info) {
                           return std::string(CpuIsaName(std::get<0>(info.param))) + "_" +
                                  std::string(DTypeName(std::get<1>(info.param)));
                         });

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
