// The attention inner loops of every ISA this CPU runs (AVX-512 when head_dim % 16 == 0, AVX2
// when % 8 == 0, plain loops otherwise) against plain loops written out here.
#include "kernels/cpu/attention_dots.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/half.h"
#include "kernels/cpu/kernel_table.h"
#include "tests/kernels/cpu/cpu_isas.h"
#include "tests/kernels/cpu/random_blocks.h"

namespace kvserve::cpu {
namespace {

using kvserve::testing::IsasThisCpuRuns;
using kvserve::testing::IsaTrace;
using kvserve::testing::RandomFloats;

// x as stored in `type` (rounded to fp16 and back for kF16), and the stored bytes.
struct Stored {
  std::vector<float> values;
  std::vector<uint16_t> halves;
  const void* data(DType type) const { return type == DType::kF16 ? static_cast<const void*>(halves.data()) : values.data(); }
};

Stored Store(std::vector<float> x, DType type) {
  Stored s;
  if (type == DType::kF16) {
    for (float& f : x) {
      s.halves.push_back(Fp32ToFp16(f));
      f = Fp16ToFp32(s.halves.back());
    }
  }
  s.values = std::move(x);
  return s;
}

TEST(AttentionDotsTest, ScoreKeysEqualsPlainDotProducts) {
  for (CpuIsa isa : IsasThisCpuRuns())
  for (DType type : {DType::kF32, DType::kF16})
  for (int64_t hd : {8, 16, 24, 48, 64, 72, 80, 128, 192, 6}) {
    SCOPED_TRACE(IsaTrace(isa));
    for (int64_t n : {1, 3, 4, 5, 7, 16})
    for (int64_t heads : {1, 3, 4, 5, 9}) {
      const int64_t k_stride = hd * 2 + 8, lw_stride = 3, out_stride = n + 2;
      const auto q = RandomFloats(heads * hd, 1);
      const Stored stored = Store(RandomFloats(n * k_stride, 2), type);
      const std::vector<float>& k = stored.values;
      const auto lw = RandomFloats(n * lw_stride, 3, 4.0f);
      std::vector<float> got(heads * out_stride, 7.0f);
      KernelsFor(isa).score_keys(q.data(), heads, stored.data(type), type, k_stride, n, hd, 0.3f, lw.data(), lw_stride,
                                 got.data(), out_stride, /*prefetch_offset=*/4096);
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t i = 0; i < n; ++i) {
          double dot = 0;
          for (int64_t d = 0; d < hd; ++d) dot += double{q[h * hd + d]} * k[i * k_stride + d];
          EXPECT_NEAR(got[h * out_stride + i], dot * 0.3 + lw[i * lw_stride], 1e-5)
              << DTypeName(type) << " hd " << hd << " n " << n << " head " << h << " key " << i;
        }
        for (int64_t i = n; i < out_stride; ++i) EXPECT_EQ(got[h * out_stride + i], 7.0f) << "wrote past n";
      }
    }
  }
}

TEST(AttentionDotsTest, ScoreKeysGivesAKeyTheSameBitsWhateverRunItIsIn) {
  // A key scored in a group of four or alone (a run's tail) must round the same way:
  // --deterministic relies on it when page runs and key blocks fall differently.
  for (CpuIsa isa : IsasThisCpuRuns())
  for (DType type : {DType::kF32, DType::kF16})
  for (int64_t hd : {8, 16, 64, 72}) {
    SCOPED_TRACE(IsaTrace(isa));
    const int64_t heads = 2, n = 11, k_stride = hd + 4;
    const auto q = RandomFloats(heads * hd, 51);
    const Stored stored = Store(RandomFloats(n * k_stride, 52), type);
    const auto lw = RandomFloats(n, 53, 2.0f);
    std::vector<float> whole(heads * n);
    KernelsFor(isa).score_keys(q.data(), heads, stored.data(type), type, k_stride, n, hd, 0.125f, lw.data(), 1,
                               whole.data(), n, 0);
    const size_t elem = type == DType::kF16 ? 2 : 4;
    for (int64_t i = 0; i < n; ++i) {
      std::vector<float> one(heads);
      const void* k_i = static_cast<const uint8_t*>(stored.data(type)) + i * k_stride * elem;
      KernelsFor(isa).score_keys(q.data(), heads, k_i, type, k_stride, 1, hd, 0.125f, lw.data() + i, 1, one.data(), 1,
                                 0);
      for (int64_t h = 0; h < heads; ++h) {
        EXPECT_EQ(one[h], whole[h * n + i]) << DTypeName(type) << " hd " << hd << " key " << i << " head " << h;
      }
    }
  }
}

TEST(AttentionDotsTest, AccumulateValuesAddsWeightedRows) {
  for (CpuIsa isa : IsasThisCpuRuns())
  for (DType type : {DType::kF32, DType::kF16})
  for (int64_t hd : {8, 16, 24, 48, 64, 72, 80, 128, 192, 6}) {
    SCOPED_TRACE(IsaTrace(isa));
    for (int64_t n : {1, 5, 16})
    for (int64_t heads : {1, 2, 3, 4, 5, 9}) {
      const int64_t v_stride = hd + 16, p_stride = n + 1;
      const auto p = RandomFloats(heads * p_stride, 4);
      const Stored stored = Store(RandomFloats(n * v_stride, 5), type);
      const std::vector<float>& v = stored.values;
      const auto start = RandomFloats(heads * hd, 6);
      std::vector<float> got = start;
      KernelsFor(isa).accumulate_values(p.data(), p_stride, heads, stored.data(type), type, v_stride, n, hd, got.data(),
                                        /*prefetch_offset=*/4096);
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t d = 0; d < hd; ++d) {
          double want = start[h * hd + d];
          for (int64_t i = 0; i < n; ++i) want += double{p[h * p_stride + i]} * v[i * v_stride + d];
          EXPECT_NEAR(got[h * hd + d], want, 1e-5) << DTypeName(type) << " hd " << hd << " n " << n << " head " << h << " col " << d;
        }
      }
    }
  }
}

TEST(AttentionDotsTest, AHeadGetsTheSameBitsWhicheverHeadsShareTheCall) {
  // The kernels take a group's query heads together (each key widened once for all of them);
  // a head's logits and outputs must not depend on that, or a model's group size would change
  // its numerics and --deterministic's batched == alone could break on a different grouping.
  for (CpuIsa isa : IsasThisCpuRuns())
  for (DType type : {DType::kF32, DType::kF16})
  for (int64_t hd : {16, 64, 72, 128})
  for (int64_t heads : {5, 9}) {  // 9: the three-head kernels (SmolLM2's groups); 5: pairs and one
    SCOPED_TRACE(IsaTrace(isa));
    const int64_t n = 13, stride = hd + 8;
    const auto q = RandomFloats(heads * hd, 61);
    const Stored keys = Store(RandomFloats(n * stride, 62), type);
    const Stored values = Store(RandomFloats(n * stride, 63), type);
    const auto lw = RandomFloats(n, 64, 2.0f);
    const auto p = RandomFloats(heads * n, 65);
    std::vector<float> logits(heads * n), acc(heads * hd, 0.5f);
    KernelsFor(isa).score_keys(q.data(), heads, keys.data(type), type, stride, n, hd, 0.125f, lw.data(), 1,
                               logits.data(), n, 0);
    KernelsFor(isa).accumulate_values(p.data(), n, heads, values.data(type), type, stride, n, hd, acc.data(), 0);
    for (int64_t h = 0; h < heads; ++h) {
      std::vector<float> one_logits(n), one_acc(hd, 0.5f);
      KernelsFor(isa).score_keys(q.data() + h * hd, 1, keys.data(type), type, stride, n, hd, 0.125f, lw.data(), 1,
                                 one_logits.data(), n, 0);
      KernelsFor(isa).accumulate_values(p.data() + h * n, n, 1, values.data(type), type, stride, n, hd, one_acc.data(),
                                        0);
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(one_logits[i], logits[h * n + i]) << DTypeName(type) << " hd " << hd << " heads " << heads << " head " << h << " key " << i;
      for (int64_t d = 0; d < hd; ++d) EXPECT_EQ(one_acc[d], acc[h * hd + d]) << DTypeName(type) << " hd " << hd << " heads " << heads << " head " << h << " col " << d;
    }
  }
}

// x[i] = exp(x[i] - shift) within 2 ulp of std::exp (0 or nearly so below the normal range),
// and the returned sum close to theirs.
void ExpectExpShiftedSumMatchesStdExp(CpuIsa isa, std::vector<float> x, float shift) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const std::vector<float> in = x;
  const float sum = KernelsFor(isa).exp_shifted_sum(x.data(), static_cast<int64_t>(x.size()), shift);
  double want_sum = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const float want = std::exp(in[i] - shift);
    want_sum += want;
    if (in[i] - shift < -87.0f) {
      EXPECT_LT(x[i], 1e-37f) << "x " << in[i];
      EXPECT_GE(x[i], 0.0f) << "x " << in[i];
      continue;
    }
    EXPECT_LE(std::fabs(x[i] - want), 2 * (std::nextafter(want, kInf) - want)) << "x - shift " << in[i] - shift;
  }
  EXPECT_NEAR(sum, want_sum, 1e-5 * want_sum);
}

TEST(AttentionDotsTest, ExpShiftedSumIsWithinTwoUlpOfStdExp) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  std::vector<float> x;
  for (float a = -87.0f; a <= 0.0f; a += 0.0137f) x.push_back(a + 1.5f);  // shifted by 1.5 below
  x.push_back(1.5f);          // exp(0) = 1 exactly
  x.push_back(-kInf);         // masked entry: 0
  x.push_back(-200.0f);       // far below the normal range: 0
  for (CpuIsa isa : IsasThisCpuRuns()) {
    SCOPED_TRACE(IsaTrace(isa));
    ExpectExpShiftedSumMatchesStdExp(isa, x, 1.5f);
    std::vector<float> y = x;
    KernelsFor(isa).exp_shifted_sum(y.data(), static_cast<int64_t>(y.size()), 1.5f);
    EXPECT_EQ(y[y.size() - 3], 1.0f);
    EXPECT_EQ(y[y.size() - 2], 0.0f);
  }
}

TEST(AttentionDotsTest, ExpShiftedSumHandlesEveryTailLength) {
  // Lengths around the 8- and 16-lane vectors; the entries past n must be left alone.
  for (CpuIsa isa : IsasThisCpuRuns()) {
    SCOPED_TRACE(IsaTrace(isa));
    for (int64_t n = 1; n <= 40; ++n) {
      std::vector<float> x = RandomFloats(static_cast<size_t>(n), 40 + static_cast<uint32_t>(n), 6.0f);
      x[0] = -std::numeric_limits<float>::infinity();
      ExpectExpShiftedSumMatchesStdExp(isa, x, 2.0f);
      std::vector<float> padded = x;
      padded.push_back(123.0f);
      KernelsFor(isa).exp_shifted_sum(padded.data(), n, 2.0f);
      EXPECT_EQ(padded.back(), 123.0f) << "n " << n << ": wrote past n";
    }
  }
}

}  // namespace
}  // namespace kvserve::cpu
