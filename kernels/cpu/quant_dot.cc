// Quantized dot products: Q4_1 x Q8_1, Q4_0 x Q8_0, Q8_0 x Q8_0, scalar and AVX2 (the AVX-512
// versions are in quant_dot_avx512.cc; kernel_table.h picks one at run time).
#include "kernels/cpu/quant_dot.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/avx2_sum.h"
#include "kernels/cpu/fp16.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/prefetch.h"

namespace kvserve::cpu {

DType ActivationTypeFor(DType w) {
  switch (w) {
    case DType::kQ4_1: return DType::kQ8_1;
    case DType::kQ4_0:
    case DType::kQ8_0: return DType::kQ8_0;
    default: return DType::kF32;
  }
}

namespace {

// Quantizes one 32-block to int8 with scale amax/127; returns the scale and the int sum.
float QuantizeBlock(const float* x, int8_t* q, int* sum) {
  float amax = 0.0f;
  for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;  // not 1/d: GGML rounds this way
  int s = 0;
  for (int j = 0; j < kQK; ++j) {
    q[j] = static_cast<int8_t>(std::nearbyint(x[j] * id));  // ties to even, like the SIMD path
    s += q[j];
  }
  *sum = s;
  return d;
}

// 32 unsigned nibbles of a Q4 block in element order: [low nibbles | high nibbles]. The 16
// bytes go to both halves in the load; the high half is shifted by 4 bits, so one mask leaves
// the high nibbles there (a byte's bits 4-7; what moves in from the next byte is masked off).
inline __m256i UnpackNibbles(const uint8_t* qs) {
  const __m256i bytes = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  return _mm256_and_si256(_mm256_srlv_epi64(bytes, _mm256_set_epi64x(4, 4, 0, 0)), _mm256_set1_epi8(0x0F));
}

// Sum of u8 x s8 products of 32 lanes, as 8 int32 lanes converted to float.
inline __m256 DotU8S8(__m256i u, __m256i s) {
  const __m256i p16 = _mm256_maddubs_epi16(u, s);
  const __m256i p32 = _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
  return _mm256_cvtepi32_ps(p32);
}

float DotQ4_0Q8_0Avx2(const BlockQ4_0* w, const BlockQ8_0* a, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  const __m256i eight = _mm256_set1_epi8(8);
  const int64_t ahead = WeightPrefetchBytes();
  for (int64_t b = 0; b < nb; ++b) {
    PrefetchWeights(w + b, ahead, 1);
    // q4 - 8 is signed; maddubs needs one unsigned operand, so move the sign onto q8.
    const __m256i q4 = _mm256_sub_epi8(UnpackNibbles(w[b].qs), eight);
    const __m256i q8 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].qs));
    const __m256 scale = _mm256_set1_ps(HalfToFloat(w[b].d) * HalfToFloat(a[b].d));
    acc = _mm256_fmadd_ps(DotU8S8(_mm256_sign_epi8(q4, q4), _mm256_sign_epi8(q8, q4)), scale, acc);
  }
  return HorizontalSum(acc);
}

float DotQ8_0Q8_0Avx2(const BlockQ8_0* w, const BlockQ8_0* a, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  const int64_t ahead = WeightPrefetchBytes();
  for (int64_t b = 0; b < nb; ++b) {
    PrefetchWeights(w + b, ahead, 1);
    const __m256i qw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs));
    const __m256i qa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].qs));
    const __m256 scale = _mm256_set1_ps(HalfToFloat(w[b].d) * HalfToFloat(a[b].d));
    acc = _mm256_fmadd_ps(DotU8S8(_mm256_sign_epi8(qw, qw), _mm256_sign_epi8(qa, qw)), scale, acc);
  }
  return HorizontalSum(acc);
}

// The fp16 pair at p (a Q4_1 block's d, m or a Q8_1 block's d, s) as fp32 lanes 0 and 1.
inline __m128 LoadHalfPair(const void* p) {
  uint32_t bits;
  std::memcpy(&bits, p, sizeof(bits));
  return _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(bits)));
}

// One Q4_1 row against a Q8_1 row, with the arithmetic of the two-row kernel below, so a row
// gets the same bits whichever way QuantDotRows groups it (--deterministic relies on that).
float DotQ4_1Q8_1Avx2(const BlockQ4_1* w, const BlockQ8_1* a, int64_t nb) {
  __m256 acc = _mm256_setzero_ps();
  __m128 mins = _mm_setzero_ps();
  const int64_t ahead = WeightPrefetchBytes();
  for (int64_t b = 0; b < nb; ++b) {
    PrefetchWeights(w + b, ahead, 1);
    const __m256i q8 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].qs));
    const __m128 p = _mm_mul_ps(LoadHalfPair(&w[b].d), LoadHalfPair(&a[b].d));
    acc = _mm256_fmadd_ps(DotU8S8(UnpackNibbles(w[b].qs), q8), _mm256_broadcastss_ps(p), acc);
    mins = _mm_add_ps(mins, p);
  }
  return HorizontalSum(acc) + _mm_cvtss_f32(_mm_shuffle_ps(mins, mins, 1));
}

// R consecutive Q4_1 rows (row_bytes apart from w_rows) against one Q8_1 activation row: the
// activation block is loaded and widened once for the R rows. Each block's (d, m) pair is
// widened in one conversion and multiplied by the activation's (d, s) in one: lane 0 is the
// scale of the block's dot, lane 1 its minimum term, which accumulates in a vector (no scalar
// chain). Per row the operations of DotQ4_1Q8_1Avx2, in its order.
template <int R>
void DotQ4_1Q8_1RowsAvx2(const uint8_t* w_rows, int64_t row_bytes, const BlockQ8_1* a, int64_t nb, float* out,
                         int64_t out_stride) {
  const BlockQ4_1* w[R];
  __m256 acc[R];
  __m128 mins[R];
  for (int i = 0; i < R; ++i) {
    w[i] = reinterpret_cast<const BlockQ4_1*>(w_rows + i * row_bytes);
    acc[i] = _mm256_setzero_ps();
    mins[i] = _mm_setzero_ps();
  }
  const int64_t ahead = WeightPrefetchBytes();
  for (int64_t b = 0; b < nb; ++b) {
    for (int i = 0; i < R; ++i) PrefetchWeights(w[i] + b, ahead, 1);
    const __m256i q8 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].qs));
    const __m128 ds = LoadHalfPair(&a[b].d);
    for (int i = 0; i < R; ++i) {
      const __m128 p = _mm_mul_ps(LoadHalfPair(&w[i][b].d), ds);
      acc[i] = _mm256_fmadd_ps(DotU8S8(UnpackNibbles(w[i][b].qs), q8), _mm256_broadcastss_ps(p), acc[i]);
      mins[i] = _mm_add_ps(mins[i], p);
    }
  }
  for (int i = 0; i < R; ++i) {
    out[i * out_stride] = HorizontalSum(acc[i]) + _mm_cvtss_f32(_mm_shuffle_ps(mins[i], mins[i], 1));
  }
}

// One Q4_1 weight row against T activation rows (a[t]): out[t * out_token_stride]. Each weight
// block is unpacked once for the T tokens; per token the operations are the one-token kernel's
// above, in its order, so a token's result has the same bits in any batch. One row at a time:
// T accumulators and the shared block fill AVX2's 16 registers.
template <int T>
void DotQ4_1TokensAvx2(const BlockQ4_1* w, const BlockQ8_1* const* a, int64_t nb, float* out,
                       int64_t out_token_stride) {
  __m256 acc[T];
  __m128 mins[T];
  for (int t = 0; t < T; ++t) {
    acc[t] = _mm256_setzero_ps();
    mins[t] = _mm_setzero_ps();
  }
  const int64_t ahead = WeightPrefetchBytes();
  for (int64_t b = 0; b < nb; ++b) {
    PrefetchWeights(w + b, ahead, 1);
    const __m256i q4 = UnpackNibbles(w[b].qs);
    const __m128 dm = LoadHalfPair(&w[b].d);
    for (int t = 0; t < T; ++t) {
      const __m256i q8 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t][b].qs));
      const __m128 p = _mm_mul_ps(dm, LoadHalfPair(&a[t][b].d));
      acc[t] = _mm256_fmadd_ps(DotU8S8(q4, q8), _mm256_broadcastss_ps(p), acc[t]);
      mins[t] = _mm_add_ps(mins[t], p);
    }
  }
  for (int t = 0; t < T; ++t) {
    out[t * out_token_stride] = HorizontalSum(acc[t]) + _mm_cvtss_f32(_mm_shuffle_ps(mins[t], mins[t], 1));
  }
}

// A Q4_0 block's quants minus 8, or a Q8_0 block's: the signed weights of the two kernels
// below (DotQ4_0Q8_0Avx2 and DotQ8_0Q8_0Avx2 do the same per token).
inline __m256i SignedQuants(const BlockQ4_0& w) { return _mm256_sub_epi8(UnpackNibbles(w.qs), _mm256_set1_epi8(8)); }
inline __m256i SignedQuants(const BlockQ8_0& w) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs));
}

// Q4_0 or Q8_0 weights (WB) against T Q8_0 activation rows; per token the operations of
// DotQ4_0Q8_0Avx2 / DotQ8_0Q8_0Avx2, in their order.
template <int T, typename WB>
void DotSignedTokensAvx2(const WB* w, const BlockQ8_0* const* a, int64_t nb, float* out, int64_t out_token_stride) {
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  const int64_t ahead = WeightPrefetchBytes();
  for (int64_t b = 0; b < nb; ++b) {
    PrefetchWeights(w + b, ahead, 1);
    const __m256i qw = SignedQuants(w[b]);
    const __m256i qw_abs = _mm256_sign_epi8(qw, qw);
    const float dw = HalfToFloat(w[b].d);
    for (int t = 0; t < T; ++t) {
      const __m256i qa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t][b].qs));
      const __m256 scale = _mm256_set1_ps(dw * HalfToFloat(a[t][b].d));
      acc[t] = _mm256_fmadd_ps(DotU8S8(qw_abs, _mm256_sign_epi8(qa, qw)), scale, acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) out[t * out_token_stride] = HorizontalSum(acc[t]);
}

// Every row of w_rows (blocks WB) against tokens [0, T) (activation rows a[t], blocks AB).
template <int T, typename WB, typename AB>
void DotRowsTokensAvx2(const uint8_t* w_rows, int64_t row_bytes, int64_t n_rows, const void* const* a, int64_t nb,
                       float* out, int64_t out_token_stride) {
  const AB* acts[T];
  for (int t = 0; t < T; ++t) acts[t] = static_cast<const AB*>(a[t]);
  for (int64_t r = 0; r < n_rows; ++r) {
    const WB* row = reinterpret_cast<const WB*>(w_rows + r * row_bytes);
    if constexpr (std::is_same_v<WB, BlockQ4_1>) {
      DotQ4_1TokensAvx2<T>(row, acts, nb, out + r, out_token_stride);
    } else {
      DotSignedTokensAvx2<T>(row, acts, nb, out + r, out_token_stride);
    }
  }
}

template <int T>
void DotRowsTokensAvx2(DType w, const uint8_t* w_rows, int64_t row_bytes, int64_t n_rows, const void* const* a,
                       int64_t nb, float* out, int64_t out_token_stride) {
  if (w == DType::kQ4_1) {
    DotRowsTokensAvx2<T, BlockQ4_1, BlockQ8_1>(w_rows, row_bytes, n_rows, a, nb, out, out_token_stride);
  } else if (w == DType::kQ4_0) {
    DotRowsTokensAvx2<T, BlockQ4_0, BlockQ8_0>(w_rows, row_bytes, n_rows, a, nb, out, out_token_stride);
  } else {
    DotRowsTokensAvx2<T, BlockQ8_0, BlockQ8_0>(w_rows, row_bytes, n_rows, a, nb, out, out_token_stride);
  }
}

}  // namespace

namespace avx2 {

void QuantDotRows(DType w, const uint8_t* w_rows, int64_t row_bytes, int64_t n_rows,
                  const void* act_row, int64_t n, float* out, int64_t out_stride) {
  int64_t r = 0;
  if (w == DType::kQ4_1) {
    // Four rows per activation load measured fastest (two: 10.7/8.2 GB/s from L2/DRAM, one
    // thread; three: 11.5/8.5; four: 11.6/8.7); Q8_0 rows stay one at a time, which streamed
    // from DRAM faster (10.4 GB/s) than two or four (7.3-7.8).
    const auto* a = static_cast<const BlockQ8_1*>(act_row);
    const int64_t nb = n / kQK;
    for (; r + 4 <= n_rows; r += 4) {
      DotQ4_1Q8_1RowsAvx2<4>(w_rows + r * row_bytes, row_bytes, a, nb, out + r * out_stride, out_stride);
    }
    for (; r + 2 <= n_rows; r += 2) {
      DotQ4_1Q8_1RowsAvx2<2>(w_rows + r * row_bytes, row_bytes, a, nb, out + r * out_stride, out_stride);
    }
  }
  for (; r < n_rows; ++r) out[r * out_stride] = QuantDot(w, w_rows + r * row_bytes, act_row, n);
}

void QuantDotRowsTokens(DType w, const uint8_t* w_rows, int64_t row_bytes, int64_t n_rows, const uint8_t* act_rows,
                        int64_t act_row_bytes, int64_t n_tokens, int64_t n, float* out, int64_t out_token_stride) {
  // One token (batch-1 decode): the rows kernel (two rows per activation load), same bits.
  if ((w != DType::kQ4_1 && w != DType::kQ4_0 && w != DType::kQ8_0) || n_tokens == 1) {
    for (int64_t t = 0; t < n_tokens; ++t) {
      QuantDotRows(w, w_rows, row_bytes, n_rows, act_rows + t * act_row_bytes, n, out + t * out_token_stride, 1);
    }
    return;
  }
  const int64_t nb = n / kQK;
  for (int64_t t = 0; t < n_tokens; t += 4) {
    const void* a[4];
    const int64_t count = std::min<int64_t>(4, n_tokens - t);
    for (int64_t i = 0; i < count; ++i) a[i] = act_rows + (t + i) * act_row_bytes;
    float* o = out + t * out_token_stride;
    switch (count) {
      case 4: DotRowsTokensAvx2<4>(w, w_rows, row_bytes, n_rows, a, nb, o, out_token_stride); break;
      case 3: DotRowsTokensAvx2<3>(w, w_rows, row_bytes, n_rows, a, nb, o, out_token_stride); break;
      case 2: DotRowsTokensAvx2<2>(w, w_rows, row_bytes, n_rows, a, nb, o, out_token_stride); break;
      default: DotRowsTokensAvx2<1>(w, w_rows, row_bytes, n_rows, a, nb, o, out_token_stride); break;
    }
  }
}

}  // namespace avx2

void QuantizeRowQ8_0(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_0*>(dst);
  for (int64_t b = 0; b < n / kQK; ++b) {
    int sum;
    y[b].d = FloatToHalf(QuantizeBlock(x + b * kQK, y[b].qs, &sum));
  }
}

void QuantizeRowQ8_1(const float* x, void* dst, int64_t n) {
  auto* y = static_cast<BlockQ8_1*>(dst);
  for (int64_t b = 0; b < n / kQK; ++b) {
    int sum;
    const float d = QuantizeBlock(x + b * kQK, y[b].qs, &sum);
    y[b].d = FloatToHalf(d);
    y[b].s = FloatToHalf(d * static_cast<float>(sum));
  }
}

namespace avx2 {

float QuantDot(DType w, const void* w_row, const void* act_row, int64_t n) {
  const int64_t nb = n / kQK;
  switch (w) {
    case DType::kQ4_1:
      return DotQ4_1Q8_1Avx2(static_cast<const BlockQ4_1*>(w_row),
                             static_cast<const BlockQ8_1*>(act_row), nb);
    case DType::kQ4_0:
      return DotQ4_0Q8_0Avx2(static_cast<const BlockQ4_0*>(w_row),
                             static_cast<const BlockQ8_0*>(act_row), nb);
    case DType::kQ8_0:
      return DotQ8_0Q8_0Avx2(static_cast<const BlockQ8_0*>(w_row),
                             static_cast<const BlockQ8_0*>(act_row), nb);
    default:
      return QuantDotReference(w, w_row, act_row, n);
  }
}

}  // namespace avx2

float QuantDot(DType w, const void* w_row, const void* act_row, int64_t n) {
  return ActiveKernels().quant_dot(w, w_row, act_row, n);
}

void QuantDotRows(DType w, const uint8_t* w_rows, int64_t row_bytes, int64_t n_rows, const void* act_row, int64_t n,
                  float* out, int64_t out_stride) {
  ActiveKernels().quant_dot_rows(w, w_rows, row_bytes, n_rows, act_row, n, out, out_stride);
}

void QuantDotRowsTokens(DType w, const uint8_t* w_rows, int64_t row_bytes, int64_t n_rows, const uint8_t* act_rows,
                        int64_t act_row_bytes, int64_t n_tokens, int64_t n, float* out, int64_t out_token_stride) {
  ActiveKernels().quant_dot_rows_tokens(w, w_rows, row_bytes, n_rows, act_rows, act_row_bytes, n_tokens, n, out,
                                        out_token_stride);
}

float QuantDotReference(DType w, const void* w_row, const void* act_row, int64_t n) {
  const int64_t nb = n / kQK;
  float total = 0.0f;
  if (w == DType::kQ4_1) {
    const auto* x = static_cast<const BlockQ4_1*>(w_row);
    const auto* y = static_cast<const BlockQ8_1*>(act_row);
    for (int64_t b = 0; b < nb; ++b) {
      int isum = 0;
      for (int j = 0; j < kQK / 2; ++j) {
        isum += (x[b].qs[j] & 0x0F) * y[b].qs[j] + (x[b].qs[j] >> 4) * y[b].qs[j + kQK / 2];
      }
      total += HalfToFloat(x[b].d) * HalfToFloat(y[b].d) * static_cast<float>(isum) +
               HalfToFloat(x[b].m) * HalfToFloat(y[b].s);
    }
  } else if (w == DType::kQ4_0) {
    const auto* x = static_cast<const BlockQ4_0*>(w_row);
    const auto* y = static_cast<const BlockQ8_0*>(act_row);
    for (int64_t b = 0; b < nb; ++b) {
      int isum = 0;
      for (int j = 0; j < kQK / 2; ++j) {
        isum += ((x[b].qs[j] & 0x0F) - 8) * y[b].qs[j] + ((x[b].qs[j] >> 4) - 8) * y[b].qs[j + kQK / 2];
      }
      total += HalfToFloat(x[b].d) * HalfToFloat(y[b].d) * static_cast<float>(isum);
    }
  } else if (w == DType::kQ8_0) {
    const auto* x = static_cast<const BlockQ8_0*>(w_row);
    const auto* y = static_cast<const BlockQ8_0*>(act_row);
    for (int64_t b = 0; b < nb; ++b) {
      int isum = 0;
      for (int j = 0; j < kQK; ++j) isum += x[b].qs[j] * y[b].qs[j];
      total += HalfToFloat(x[b].d) * HalfToFloat(y[b].d) * static_cast<float>(isum);
    }
  }
  return total;
}

}  // namespace kvserve::cpu
