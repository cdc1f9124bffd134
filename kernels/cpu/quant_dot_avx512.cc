// AVX-512 + VNNI quantized dot products (quant_dot.h): two 32-element blocks per 512-bit
// vector, u8 x s8 products summed four at a time by one vpdpbusd. The AVX2 versions and the
// scalar reference are in quant_dot.cc. Like them, every weight loop asks for the bytes
// WeightPrefetchBytes() ahead (prefetch.h): without it, on the Zen 4 EPYC box these kernels
// streamed Q4_1 rows from DRAM at 8.5 GB/s against the AVX2 kernels' 10.9, and batch-1 4K
// decode under AVX-512 ran at 53-62 tok/s against AVX2's 69-73 (docs/PERF.md, fifteenth session).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/prefetch.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/quant_dot.h"
#include "kernels/cpu/avx512_target.h"  // last: what follows is compiled for AVX-512

namespace kvserve::cpu::avx512 {
namespace {

// Stand-ins for the block after the last one when a row has an odd number of blocks: all
// quants and scales zero, so the pair's second half adds exactly nothing.
constexpr BlockQ4_1 kZeroQ4_1{};
constexpr BlockQ4_0 kZeroQ4_0{};
constexpr BlockQ8_0 kZeroQ8_0{};
constexpr BlockQ8_1 kZeroQ8_1{};

// Two fp16 pairs (a Q4_1 block's d, m or a Q8_1 block's d, s) as fp32 [x0, y0, x1, y1].
inline __m128 LoadHalfPairs(const void* p0, const void* p1) {
  int32_t a, b;
  std::memcpy(&a, p0, sizeof(a));
  std::memcpy(&b, p1, sizeof(b));
  return _mm_cvtph_ps(_mm_insert_epi32(_mm_cvtsi32_si128(a), b, 1));
}

// Two fp16 scales as fp32 [x0, x1, 0, 0].
inline __m128 LoadHalves(const uint16_t* p0, const uint16_t* p1) {
  const uint32_t bits = static_cast<uint32_t>(*p0) | (static_cast<uint32_t>(*p1) << 16);
  return _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(bits)));
}

// Q4 quants of blocks b and b + 1 as 64 unsigned bytes in the order the activations are
// loaded in (LoadQ8PairForQ4): [lo(b) | lo(b+1) | hi(b) | hi(b+1)], lo being elements 0-15 of a
// block (low nibbles) and hi elements 16-31 (high nibbles).
inline __m512i UnpackNibblePair(const uint8_t* qs0, const uint8_t* qs1) {
  const __m256i bytes = _mm256_inserti128_si256(
      _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs0))),
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs1)), 1);
  const __m256i mask = _mm256_set1_epi8(0x0F);
  const __m256i lo = _mm256_and_si256(bytes, mask);
  const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), mask);
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// 32 int8 activations of each of two blocks, 128-bit lanes reordered to match the nibbles.
inline __m512i LoadQ8PairForQ4(const int8_t* qs0, const int8_t* qs1) {
  const __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs0))),
                                       _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs1)), 1);
  return _mm512_shuffle_i64x2(v, v, _MM_SHUFFLE(3, 1, 2, 0));
}

// After a vpdpbusd of such a pair, int32 lanes 0-3 and 8-11 hold sums of block b, lanes 4-7 and
// 12-15 of block b + 1. A per-block value at float lane 0 (b) or `second` (b + 1) of a
// 128-bit vector, spread to those lanes:
inline __m512 SpreadQ4PairScale(__m128 s, int second) {
  const __m512i idx = _mm512_setr_epi32(0, 0, 0, 0, second, second, second, second, 0, 0, 0, 0, second, second,
                                        second, second);
  return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(s));
}

// lanes 1 and 3 of v, added.
inline float SumOddLanes(__m128 v) {
  const __m128 odd = _mm_movehdup_ps(v);  // [v1, v1, v3, v3]
  return _mm_cvtss_f32(_mm_add_ss(odd, _mm_movehl_ps(odd, odd)));
}

// R Q4_1 rows (w[r], nb blocks each) against one Q8_1 activation row: out[r * out_stride].
// Each activation pair is loaded and reordered once for all R rows.
template <int R>
void DotQ4_1Rows(const BlockQ4_1* const* w, const BlockQ8_1* a, int64_t nb, float* out, int64_t out_stride) {
  __m512 acc[R];
  __m128 mins[R];  // lanes 1 and 3: the blocks' m * s terms
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm512_setzero_ps();
    mins[r] = _mm_setzero_ps();
  }
  const int64_t ahead = WeightPrefetchBytes();
  for (int64_t b = 0; b < nb; b += 2) {
    for (int r = 0; r < R; ++r) PrefetchWeights(w[r] + b, ahead, 2 * int64_t{sizeof(BlockQ4_1)});
    const bool pair = b + 1 < nb;
    const BlockQ8_1& a1 = pair ? a[b + 1] : kZeroQ8_1;
    const __m512i q8 = LoadQ8PairForQ4(a[b].qs, a1.qs);
    const __m128 ds = LoadHalfPairs(&a[b].d, &a1.d);  // [d0, s0, d1, s1]
    for (int r = 0; r < R; ++r) {
      const BlockQ4_1& w1 = pair ? w[r][b + 1] : kZeroQ4_1;
      const __m128 p = _mm_mul_ps(LoadHalfPairs(&w[r][b].d, &w1.d), ds);  // [d*d, m*s] per block
      const __m512i dots = _mm512_dpbusd_epi32(_mm512_setzero_si512(), UnpackNibblePair(w[r][b].qs, w1.qs), q8);
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dots), SpreadQ4PairScale(p, 2), acc[r]);
      mins[r] = _mm_add_ps(mins[r], p);
    }
  }
  for (int r = 0; r < R; ++r) out[r * out_stride] = _mm512_reduce_add_ps(acc[r]) + SumOddLanes(mins[r]);
}

// R Q4_1 rows against T Q8_1 activation rows (a[t], a batch's tokens): out[t * out_token_stride
// + r]. Each weight block pair is unpacked once for all T tokens (a batch of decodes otherwise
// unpacks every weight once per token). Per (row, token) the operations are DotQ4_1Rows'
// exactly, in the same order, so a token's result has the same bits whatever batch it is in.
template <int R, int T>
void DotRowsTokens(const BlockQ4_1* const* w, const BlockQ8_1* const* a, int64_t nb, float* out,
                   int64_t out_token_stride) {
  __m512 acc[R][T];
  __m128 mins[R][T];
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) {
      acc[r][t] = _mm512_setzero_ps();
      mins[r][t] = _mm_setzero_ps();
    }
  }
  const int64_t ahead = WeightPrefetchBytes();
  for (int64_t b = 0; b < nb; b += 2) {
    for (int r = 0; r < R; ++r) PrefetchWeights(w[r] + b, ahead, 2 * int64_t{sizeof(BlockQ4_1)});
    const bool pair = b + 1 < nb;
    __m512i q4[R];
    __m128 dm[R];
    for (int r = 0; r < R; ++r) {
      const BlockQ4_1& w1 = pair ? w[r][b + 1] : kZeroQ4_1;
      q4[r] = UnpackNibblePair(w[r][b].qs, w1.qs);
      dm[r] = LoadHalfPairs(&w[r][b].d, &w1.d);
    }
    for (int t = 0; t < T; ++t) {
      const BlockQ8_1& a1 = pair ? a[t][b + 1] : kZeroQ8_1;
      const __m512i q8 = LoadQ8PairForQ4(a[t][b].qs, a1.qs);
      const __m128 ds = LoadHalfPairs(&a[t][b].d, &a1.d);
      for (int r = 0; r < R; ++r) {
        const __m128 p = _mm_mul_ps(dm[r], ds);
        const __m512i dots = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q4[r], q8);
        acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dots), SpreadQ4PairScale(p, 2), acc[r][t]);
        mins[r][t] = _mm_add_ps(mins[r][t], p);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) out[t * out_token_stride + r] = _mm512_reduce_add_ps(acc[r][t]) + SumOddLanes(mins[r][t]);
  }
}

float DotQ4_0Q8_0(const BlockQ4_0* w, const BlockQ8_0* a, int64_t nb) {
  // (q4 - 8) * q8 = q4 * q8 - 8 * q8, per int32 lane: vpdpbusd needs its first operand unsigned.
  const __m512i eight = _mm512_set1_epi8(8);
  __m512 acc = _mm512_setzero_ps();
  const int64_t ahead = WeightPrefetchBytes();
  for (int64_t b = 0; b < nb; b += 2) {
    PrefetchWeights(w + b, ahead, 2 * int64_t{sizeof(BlockQ4_0)});
    const bool pair = b + 1 < nb;
    const BlockQ8_0& a1 = pair ? a[b + 1] : kZeroQ8_0;
    const BlockQ4_0& w1 = pair ? w[b + 1] : kZeroQ4_0;
    const __m512i q8 = LoadQ8PairForQ4(a[b].qs, a1.qs);
    const __m512i bias = _mm512_dpbusd_epi32(_mm512_setzero_si512(), eight, q8);
    const __m512i dots =
        _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), UnpackNibblePair(w[b].qs, w1.qs), q8), bias);
    const __m128 scale = _mm_mul_ps(LoadHalves(&w[b].d, &w1.d), LoadHalves(&a[b].d, &a1.d));
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dots), SpreadQ4PairScale(scale, 1), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

float DotQ8_0Q8_0(const BlockQ8_0* w, const BlockQ8_0* a, int64_t nb) {
  // w * a = (w + 128) * a - 128 * a, with w + 128 unsigned (w xor 0x80).
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i idx = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  __m512 acc = _mm512_setzero_ps();
  const int64_t ahead = WeightPrefetchBytes();
  for (int64_t b = 0; b < nb; b += 2) {
    PrefetchWeights(w + b, ahead, 2 * int64_t{sizeof(BlockQ8_0)});
    const bool pair = b + 1 < nb;
    const BlockQ8_0& a1 = pair ? a[b + 1] : kZeroQ8_0;
    const BlockQ8_0& w1 = pair ? w[b + 1] : kZeroQ8_0;
    const __m512i qa = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].qs))),
                                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a1.qs)), 1);
    const __m512i qw = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs))),
                                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w1.qs)), 1);
    const __m512i bias = _mm512_dpbusd_epi32(_mm512_setzero_si512(), flip, qa);
    const __m512i dots =
        _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_xor_si512(qw, flip), qa), bias);
    const __m128 scale = _mm_mul_ps(LoadHalves(&w[b].d, &w1.d), LoadHalves(&a[b].d, &a1.d));
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dots), _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(scale)), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

// R Q8_0 rows against T Q8_0 activation rows, as DotRowsTokens does for Q4_1: each weight
// block pair is loaded and flipped once for all T tokens, each token's bias once for all R
// rows; per (row, token) the operations are DotQ8_0Q8_0's, in its order (the same bits).
template <int R, int T>
void DotRowsTokens(const BlockQ8_0* const* w, const BlockQ8_0* const* a, int64_t nb, float* out,
                   int64_t out_token_stride) {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i idx = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  __m512 acc[R][T];
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  }
  const int64_t ahead = WeightPrefetchBytes();
  for (int64_t b = 0; b < nb; b += 2) {
    for (int r = 0; r < R; ++r) PrefetchWeights(w[r] + b, ahead, 2 * int64_t{sizeof(BlockQ8_0)});
    const bool pair = b + 1 < nb;
    __m512i qw[R];
    __m128 dw[R];
    for (int r = 0; r < R; ++r) {
      const BlockQ8_0& w1 = pair ? w[r][b + 1] : kZeroQ8_0;
      qw[r] = _mm512_xor_si512(
          _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[r][b].qs))),
                             _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w1.qs)), 1),
          flip);
      dw[r] = LoadHalves(&w[r][b].d, &w1.d);
    }
    for (int t = 0; t < T; ++t) {
      const BlockQ8_0& a1 = pair ? a[t][b + 1] : kZeroQ8_0;
      const __m512i qa = _mm512_inserti64x4(
          _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t][b].qs))),
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a1.qs)), 1);
      const __m512i bias = _mm512_dpbusd_epi32(_mm512_setzero_si512(), flip, qa);
      const __m128 da = LoadHalves(&a[t][b].d, &a1.d);
      for (int r = 0; r < R; ++r) {
        const __m512i dots = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), qw[r], qa), bias);
        const __m128 scale = _mm_mul_ps(dw[r], da);
        acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dots), _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(scale)),
                                    acc[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) out[t * out_token_stride + r] = _mm512_reduce_add_ps(acc[r][t]);
  }
}

// R Q4_0 rows against T Q8_0 activation rows: each weight block pair unpacked once for all T
// tokens, each token's bias once for all R rows; per (row, token) DotQ4_0Q8_0's operations.
template <int R, int T>
void DotRowsTokens(const BlockQ4_0* const* w, const BlockQ8_0* const* a, int64_t nb, float* out,
                   int64_t out_token_stride) {
  const __m512i eight = _mm512_set1_epi8(8);
  __m512 acc[R][T];
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  }
  const int64_t ahead = WeightPrefetchBytes();
  for (int64_t b = 0; b < nb; b += 2) {
    for (int r = 0; r < R; ++r) PrefetchWeights(w[r] + b, ahead, 2 * int64_t{sizeof(BlockQ4_0)});
    const bool pair = b + 1 < nb;
    __m512i q4[R];
    for (int r = 0; r < R; ++r) {
      const BlockQ4_0& w1 = pair ? w[r][b + 1] : kZeroQ4_0;
      q4[r] = UnpackNibblePair(w[r][b].qs, w1.qs);
    }
    for (int t = 0; t < T; ++t) {
      const BlockQ8_0& a1 = pair ? a[t][b + 1] : kZeroQ8_0;
      const __m512i q8 = LoadQ8PairForQ4(a[t][b].qs, a1.qs);
      const __m512i bias = _mm512_dpbusd_epi32(_mm512_setzero_si512(), eight, q8);
      for (int r = 0; r < R; ++r) {
        const BlockQ4_0& w1 = pair ? w[r][b + 1] : kZeroQ4_0;
        const __m512i dots = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), q4[r], q8), bias);
        const __m128 scale = _mm_mul_ps(LoadHalves(&w[r][b].d, &w1.d), LoadHalves(&a[t][b].d, &a1.d));
        acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dots), SpreadQ4PairScale(scale, 1), acc[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) out[t * out_token_stride + r] = _mm512_reduce_add_ps(acc[r][t]);
  }
}

// Rows [0, n_rows) of weights in blocks WB against tokens [0, T) of activations in blocks AB
// (a[t]): two rows at a time, then one, through DotRowsTokens for that pair of block types.
template <int T, typename WB, typename AB>
void DotAllRowsTokens(const uint8_t* w_rows, int64_t row_bytes, int64_t n_rows, const void* const* a, int64_t nb,
                      float* out, int64_t out_token_stride) {
  const auto row = [&](int64_t i) { return reinterpret_cast<const WB*>(w_rows + i * row_bytes); };
  const AB* acts[T];
  for (int t = 0; t < T; ++t) acts[t] = static_cast<const AB*>(a[t]);
  int64_t r = 0;
  for (; r + 2 <= n_rows; r += 2) {
    const WB* rows[2] = {row(r), row(r + 1)};
    DotRowsTokens<2, T>(rows, acts, nb, out + r, out_token_stride);
  }
  if (r < n_rows) {
    const WB* rows[1] = {row(r)};
    DotRowsTokens<1, T>(rows, acts, nb, out + r, out_token_stride);
  }
}

template <int T>
void DotAllRowsTokens(DType w, const uint8_t* w_rows, int64_t row_bytes, int64_t n_rows, const void* const* a,
                      int64_t nb, float* out, int64_t out_token_stride) {
  if (w == DType::kQ4_1) {
    DotAllRowsTokens<T, BlockQ4_1, BlockQ8_1>(w_rows, row_bytes, n_rows, a, nb, out, out_token_stride);
  } else if (w == DType::kQ4_0) {
    DotAllRowsTokens<T, BlockQ4_0, BlockQ8_0>(w_rows, row_bytes, n_rows, a, nb, out, out_token_stride);
  } else {
    DotAllRowsTokens<T, BlockQ8_0, BlockQ8_0>(w_rows, row_bytes, n_rows, a, nb, out, out_token_stride);
  }
}

}  // namespace

float QuantDot(DType w, const void* w_row, const void* act_row, int64_t n) {
  const int64_t nb = n / kQK;
  switch (w) {
    case DType::kQ4_1: {
      const BlockQ4_1* row = static_cast<const BlockQ4_1*>(w_row);
      float out;
      DotQ4_1Rows<1>(&row, static_cast<const BlockQ8_1*>(act_row), nb, &out, 1);
      return out;
    }
    case DType::kQ4_0:
      return DotQ4_0Q8_0(static_cast<const BlockQ4_0*>(w_row), static_cast<const BlockQ8_0*>(act_row), nb);
    case DType::kQ8_0:
      return DotQ8_0Q8_0(static_cast<const BlockQ8_0*>(w_row), static_cast<const BlockQ8_0*>(act_row), nb);
    default:
      return QuantDotReference(w, w_row, act_row, n);
  }
}

void QuantDotRows(DType w, const uint8_t* w_rows, int64_t row_bytes, int64_t n_rows, const void* act_row, int64_t n,
                  float* out, int64_t out_stride) {
  int64_t r = 0;
  if (w == DType::kQ4_1) {
    const auto* a = static_cast<const BlockQ8_1*>(act_row);
    const auto row = [&](int64_t i) { return reinterpret_cast<const BlockQ4_1*>(w_rows + i * row_bytes); };
    for (; r + 4 <= n_rows; r += 4) {
      const BlockQ4_1* rows[4] = {row(r), row(r + 1), row(r + 2), row(r + 3)};
      DotQ4_1Rows<4>(rows, a, n / kQK, out + r * out_stride, out_stride);
    }
    for (; r + 2 <= n_rows; r += 2) {
      const BlockQ4_1* rows[2] = {row(r), row(r + 1)};
      DotQ4_1Rows<2>(rows, a, n / kQK, out + r * out_stride, out_stride);
    }
  }
  for (; r < n_rows; ++r) out[r * out_stride] = QuantDot(w, w_rows + r * row_bytes, act_row, n);
}

void QuantDotRowsTokens(DType w, const uint8_t* w_rows, int64_t row_bytes, int64_t n_rows, const uint8_t* act_rows,
                        int64_t act_row_bytes, int64_t n_tokens, int64_t n, float* out, int64_t out_token_stride) {
  // One token (batch-1 decode): the rows kernel's four rows per activation load is faster
  // there, and gives the same bits.
  if ((w != DType::kQ4_1 && w != DType::kQ4_0 && w != DType::kQ8_0) || n_tokens == 1) {
    for (int64_t t = 0; t < n_tokens; ++t) {
      QuantDotRows(w, w_rows, row_bytes, n_rows, act_rows + t * act_row_bytes, n, out + t * out_token_stride, 1);
    }
    return;
  }
  const int64_t nb = n / kQK;
  for (int64_t t = 0; t < n_tokens; t += 4) {
    const void* a[4];
    const int64_t count = n_tokens - t >= 4 ? 4 : n_tokens - t;  // not std::min: avx512_target.h
    for (int64_t i = 0; i < count; ++i) a[i] = act_rows + (t + i) * act_row_bytes;
    float* o = out + t * out_token_stride;
    switch (count) {
      case 4: DotAllRowsTokens<4>(w, w_rows, row_bytes, n_rows, a, nb, o, out_token_stride); break;
      case 3: DotAllRowsTokens<3>(w, w_rows, row_bytes, n_rows, a, nb, o, out_token_stride); break;
      case 2: DotAllRowsTokens<2>(w, w_rows, row_bytes, n_rows, a, nb, o, out_token_stride); break;
      default: DotAllRowsTokens<1>(w, w_rows, row_bytes, n_rows, a, nb, o, out_token_stride); break;
    }
  }
}

}  // namespace kvserve::cpu::avx512

KVSERVE_AVX512_END
