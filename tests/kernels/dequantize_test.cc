// DequantizeRow and the fp16/bf16 conversions against golden values made by gguf-py's
// numpy dequantizers (tests/golden/make_dequant_golden.py) and against the CPU's F16C.
#include "kernels/cpu/dequantize.h"

#include <gtest/gtest.h>
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/half.h"
#include "tests/test_paths.h"

namespace kvserve {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

struct Golden {
  std::vector<uint8_t> bytes;
  std::vector<float> expected;
};

Golden LoadGolden(const std::string& name) {
  const std::string s = ReadAll(testing::SourcePath("tests/golden/dequant/" + name + ".bin"));
  Golden g;
  if (s.size() < 8) {
    ADD_FAILURE() << "missing golden file for " << name << "; run tests/golden/make_dequant_golden.py";
    return g;
  }
  uint32_t n, nb;
  std::memcpy(&n, s.data(), 4);
  std::memcpy(&nb, s.data() + 4, 4);
  EXPECT_EQ(s.size(), 8 + nb + 4ull * n) << name;
  g.bytes.assign(s.begin() + 8, s.begin() + 8 + nb);
  g.expected.resize(n);
  std::memcpy(g.expected.data(), s.data() + 8 + nb, 4ull * n);
  return g;
}

// Same number, or both NaN.
bool SameFloat(float a, float b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

struct Case {
  const char* name;
  DType type;
};

class DequantGolden : public ::testing::TestWithParam<Case> {};

TEST_P(DequantGolden, MatchesGgufPy) {
  const Case c = GetParam();
  const Golden g = LoadGolden(c.name);
  ASSERT_FALSE(g.expected.empty());
  const int64_t n = static_cast<int64_t>(g.expected.size());
  ASSERT_EQ(static_cast<int64_t>(g.bytes.size()), RowBytes(c.type, n)) << c.name;
  std::vector<float> got(n, -12345.0f);
  DequantizeRow(c.type, g.bytes.data(), got.data(), n);
  // The reference computes scale products in fp32 exactly as we do; allow only the last-bit
  // difference a fused multiply-add may introduce, relative to the block's magnitude.
  float max_abs = 0;
  for (float v : g.expected) {
    if (std::isfinite(v)) max_abs = std::max(max_abs, std::fabs(v));
  }
  int mismatches = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float e = g.expected[i];
    const bool ok = BlockElements(c.type) == 1
                        ? SameFloat(got[i], e)
                        : std::fabs(got[i] - e) <= 2e-7f * max_abs;
    if (!ok && ++mismatches <= 5) {
      ADD_FAILURE() << c.name << " element " << i << ": got " << got[i] << ", gguf-py " << e;
    }
  }
  EXPECT_EQ(mismatches, 0) << c.name;
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, DequantGolden,
    ::testing::Values(Case{"F32", DType::kF32}, Case{"F16", DType::kF16},
                      Case{"BF16", DType::kBF16}, Case{"Q4_0", DType::kQ4_0},
                      Case{"Q4_1", DType::kQ4_1}, Case{"Q8_0", DType::kQ8_0},
                      Case{"Q4_K", DType::kQ4_K}, Case{"Q5_K", DType::kQ5_K},
                      Case{"Q6_K", DType::kQ6_K}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

TEST(Dequantize, RowOfManyBlocksIsBlockwise) {
  // A row of several blocks must equal each block dequantized on its own (offsets right).
  const Golden g = LoadGolden("Q4_K");
  ASSERT_EQ(g.bytes.size(), 4u * 144);
  std::vector<float> row(1024);
  DequantizeRow(DType::kQ4_K, g.bytes.data(), row.data(), 1024);
  for (int b = 0; b < 4; ++b) {
    float one[256];
    DequantizeRow(DType::kQ4_K, g.bytes.data() + b * 144, one, 256);
    for (int i = 0; i < 256; ++i) ASSERT_EQ(one[i], row[b * 256 + i]) << b << " " << i;
  }
}

TEST(Half, Fp32ToFp16AndBf16MatchNumpy) {
  const std::string s = ReadAll(testing::SourcePath("tests/golden/dequant/half.bin"));
  ASSERT_GE(s.size(), 4u);
  uint32_t n;
  std::memcpy(&n, s.data(), 4);
  ASSERT_EQ(s.size(), 4 + 8ull * n);
  for (uint32_t i = 0; i < n; ++i) {
    float x;
    uint16_t h, b;
    std::memcpy(&x, s.data() + 4 + 4 * i, 4);
    std::memcpy(&h, s.data() + 4 + 4 * n + 2 * i, 2);
    std::memcpy(&b, s.data() + 4 + 6 * n + 2 * i, 2);
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(Fp16ToFp32(Fp32ToFp16(x))));
    } else {
      EXPECT_EQ(Fp32ToFp16(x), h) << "x=" << x;
    }
    EXPECT_EQ(Fp32ToBf16(x), b) << "x=" << x;
  }
}

TEST(Half, Fp16ToFp32MatchesF16cForAllBitPatterns) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float want = _cvtsh_ss(static_cast<unsigned short>(h));
    const float got = Fp16ToFp32(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << h;
    } else {
      ASSERT_EQ(FloatBits(got), FloatBits(want)) << "h=0x" << std::hex << h;
      // fp16 -> fp32 -> fp16 is the identity on non-NaN values.
      ASSERT_EQ(Fp32ToFp16(got), h) << "h=0x" << std::hex << h;
    }
  }
}

TEST(Half, Fp32ToFp16MatchesF16cOnRandomFloats) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    // Random bit patterns concentrated around the fp16 range (exponents 100..150).
    uint32_t u = bits(rng);
    u = (u & 0x807fffffu) | ((100u + (u >> 23) % 51) << 23);
    const float x = BitsToFloat(u);
    const uint16_t want = _cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT);
    ASSERT_EQ(Fp32ToFp16(x), want) << "x bits 0x" << std::hex << u;
  }
}

TEST(Half, Bf16RoundsToNearestEven) {
  EXPECT_EQ(Fp32ToBf16(1.0f), 0x3f80);
  EXPECT_EQ(Fp32ToBf16(BitsToFloat(0x3f808000u)), 0x3f80);  // tie, even stays
  EXPECT_EQ(Fp32ToBf16(BitsToFloat(0x3f818000u)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(Fp32ToBf16(BitsToFloat(0x3f808001u)), 0x3f81);
  EXPECT_TRUE(std::isnan(Bf16ToFp32(Fp32ToBf16(NAN))));
  EXPECT_EQ(Bf16ToFp32(0xc040), -3.0f);
}

}  // namespace
}  // namespace kvserve
