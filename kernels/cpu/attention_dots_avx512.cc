// AVX-512 versions of the attention inner loops (attention_dots.h) for head_dim % 16 == 0:
// 16 lanes per instruction, so a 64-wide head is 4 registers instead of 8. Other head
// sizes go to the AVX2 versions in attention_dots.cc.
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/prefetch.h"
#include "kernels/cpu/avx512_target.h"  // last: what follows is compiled for AVX-512

namespace kvserve::cpu::avx512 {
namespace {

inline __m512 Load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 Load16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// The same range reduction and degree-7 polynomial as the AVX2 Exp8 (attention_dots.cc), so
// both stay within 2 ulp of std::exp; 2^k is built in the exponent field, zero below -87.3.
inline __m512 Exp16(__m512 x) {
  const __m512 lo = _mm512_set1_ps(-87.33654f);
  const __mmask16 normal = _mm512_cmp_ps_mask(x, lo, _CMP_GE_OQ);  // false for -inf too
  x = _mm512_min_ps(_mm512_max_ps(x, lo), _mm512_set1_ps(88.72283f));
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(k), _mm512_set1_epi32(127)), 23);
  return _mm512_maskz_mul_ps(normal, p, _mm512_castsi512_ps(e));
}

// The four lanes' totals of a0..a3, in that order.
inline __m128 Sum16x4(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
  const auto half = [](__m512 v) {
    return _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  };
  const __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(half(a0), half(a1)), _mm256_hadd_ps(half(a2), half(a3)));
  return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

// Logits of kHeads query heads (q [kHeads, hd]) for keys [0, n). A group's heads share the
// keys, so each key is loaded and widened once for all of them rather than once per head
// (for f16 pages the conversion, not the memory, was the cost). Every (head, key) dot is
// still summed in the same order as one head alone, so the bits do not depend on kHeads.
template <int kHeads, typename T>
void ScoreHeadGroup(const float* q, const T* k, int64_t k_stride, int64_t n, int64_t hd, float scale, const float* lw,
                    int64_t lw_stride, float* logits, int64_t logits_stride, int64_t prefetch_offset) {
  const __m128 vscale = _mm_set1_ps(scale);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const T* k0 = k + i * k_stride;
    if (prefetch_offset != 0) {
      for (int j = 0; j < 4; ++j)
        PrefetchKv(k0, prefetch_offset + j * k_stride * int64_t{sizeof(T)}, hd * int64_t{sizeof(T)});
    }
    __m512 a[kHeads][4];
    for (int h = 0; h < kHeads; ++h) {
      for (int j = 0; j < 4; ++j) a[h][j] = _mm512_setzero_ps();
    }
    for (int64_t d = 0; d < hd; d += 16) {
      const __m512 k_0 = Load16(k0 + d), k_1 = Load16(k0 + k_stride + d), k_2 = Load16(k0 + 2 * k_stride + d),
                   k_3 = Load16(k0 + 3 * k_stride + d);
      for (int h = 0; h < kHeads; ++h) {
        const __m512 qv = _mm512_loadu_ps(q + h * hd + d);
        a[h][0] = _mm512_fmadd_ps(qv, k_0, a[h][0]);
        a[h][1] = _mm512_fmadd_ps(qv, k_1, a[h][1]);
        a[h][2] = _mm512_fmadd_ps(qv, k_2, a[h][2]);
        a[h][3] = _mm512_fmadd_ps(qv, k_3, a[h][3]);
      }
    }
    const __m128 w = _mm_setr_ps(lw[i * lw_stride], lw[(i + 1) * lw_stride], lw[(i + 2) * lw_stride],
                                 lw[(i + 3) * lw_stride]);
    for (int h = 0; h < kHeads; ++h) {
      _mm_storeu_ps(logits + h * logits_stride + i, _mm_fmadd_ps(Sum16x4(a[h][0], a[h][1], a[h][2], a[h][3]), vscale, w));
    }
  }
  // The last keys one at a time, summed and scaled exactly as in a group of four, so a key's
  // logit has the same bits wherever a run or block boundary puts it (--deterministic).
  for (; i < n; ++i) {
    for (int h = 0; h < kHeads; ++h) {
      __m512 a = _mm512_setzero_ps();
      for (int64_t d = 0; d < hd; d += 16) a = _mm512_fmadd_ps(_mm512_loadu_ps(q + h * hd + d), Load16(k + i * k_stride + d), a);
      const __m512 zero = _mm512_setzero_ps();
      logits[h * logits_stride + i] =
          _mm_cvtss_f32(_mm_fmadd_ps(Sum16x4(a, zero, zero, zero), vscale, _mm_set_ss(lw[i * lw_stride])));
    }
  }
}

// Up to four heads share one pass over the keys: 16 accumulators, four widened keys and a
// query vector fit AVX-512's 32 registers.
template <typename T>
void ScoreKeysAs(const float* q, int64_t heads, const T* k, int64_t k_stride, int64_t n, int64_t hd, float scale,
                 const float* lw, int64_t lw_stride, float* logits, int64_t logits_stride, int64_t prefetch_offset) {
  for (int64_t h = 0; h < heads; h += 4) {
    const float* qh = q + h * hd;
    float* out = logits + h * logits_stride;
    switch (heads - h >= 4 ? 4 : heads - h) {  // not std::min: no shared inline code here (avx512_target.h)
      case 4:
        ScoreHeadGroup<4>(qh, k, k_stride, n, hd, scale, lw, lw_stride, out, logits_stride, prefetch_offset);
        break;
      case 3:
        ScoreHeadGroup<3>(qh, k, k_stride, n, hd, scale, lw, lw_stride, out, logits_stride, prefetch_offset);
        break;
      case 2:
        ScoreHeadGroup<2>(qh, k, k_stride, n, hd, scale, lw, lw_stride, out, logits_stride, prefetch_offset);
        break;
      default:
        ScoreHeadGroup<1>(qh, k, k_stride, n, hd, scale, lw, lw_stride, out, logits_stride, prefetch_offset);
        break;
    }
  }
}

// Columns [0, 16 * kVecs) of kHeads heads' outputs (acc rows hd apart), kept in registers over
// all n values; each value row is widened once for every head. Per output element the sum
// runs over i in order, as with one head alone, so the bits do not depend on the grouping.
template <int kHeads, int kVecs, typename T>
inline void AccumulateColumns(const float* p, int64_t p_stride, const T* v, int64_t v_stride, int64_t n, int64_t hd,
                              float* acc, int64_t prefetch_offset) {
  // Unrolled by hand (the pragmas), as in attention_dots.cc: else GCC 12 keeps `a` on the stack
  // and stores every accumulator for every value row.
  __m512 a[kHeads][kVecs];
#pragma GCC unroll 16
  for (int h = 0; h < kHeads; ++h) {
#pragma GCC unroll 16
    for (int c = 0; c < kVecs; ++c) a[h][c] = _mm512_loadu_ps(acc + h * hd + 16 * c);
  }
  for (int64_t i = 0; i < n; ++i) {
    const T* vi = v + i * v_stride;
    if (prefetch_offset != 0) PrefetchKv(vi, prefetch_offset, kVecs * 16 * int64_t{sizeof(T)});
    __m512 x[kVecs];
    for (int c = 0; c < kVecs; ++c) x[c] = Load16(vi + 16 * c);
    for (int h = 0; h < kHeads; ++h) {
      const __m512 w = _mm512_set1_ps(p[h * p_stride + i]);
      for (int c = 0; c < kVecs; ++c) a[h][c] = _mm512_fmadd_ps(w, x[c], a[h][c]);
    }
  }
#pragma GCC unroll 16
  for (int h = 0; h < kHeads; ++h) {
#pragma GCC unroll 16
    for (int c = 0; c < kVecs; ++c) _mm512_storeu_ps(acc + h * hd + 16 * c, a[h][c]);
  }
}

// Columns [0, 16 * kVecs) of `heads` heads, four heads at a time (16 accumulators, four
// widened values and a weight in AVX-512's 32 registers).
template <int kVecs, typename T>
void AccumulateColumnsAllHeads(const float* p, int64_t p_stride, int64_t heads, const T* v, int64_t v_stride, int64_t n,
                               int64_t hd, float* acc, int64_t prefetch_offset) {
  for (int64_t h = 0; h < heads; h += 4) {
    const float* ph = p + h * p_stride;
    float* ah = acc + h * hd;
    switch (heads - h >= 4 ? 4 : heads - h) {  // not std::min: no shared inline code here (avx512_target.h)
      case 4:
        AccumulateColumns<4, kVecs>(ph, p_stride, v, v_stride, n, hd, ah, prefetch_offset);
        break;
      case 3:
        AccumulateColumns<3, kVecs>(ph, p_stride, v, v_stride, n, hd, ah, prefetch_offset);
        break;
      case 2:
        AccumulateColumns<2, kVecs>(ph, p_stride, v, v_stride, n, hd, ah, prefetch_offset);
        break;
      default:
        AccumulateColumns<1, kVecs>(ph, p_stride, v, v_stride, n, hd, ah, prefetch_offset);
        break;
    }
  }
}

template <typename T>
void AccumulateValuesAs(const float* p, int64_t p_stride, int64_t heads, const T* v, int64_t v_stride, int64_t n,
                        int64_t hd, float* acc, int64_t prefetch_offset) {
  int64_t d = 0;
  for (; d + 64 <= hd; d += 64)
    AccumulateColumnsAllHeads<4>(p, p_stride, heads, v + d, v_stride, n, hd, acc + d, prefetch_offset);
  for (; d < hd; d += 16)
    AccumulateColumnsAllHeads<1>(p, p_stride, heads, v + d, v_stride, n, hd, acc + d, prefetch_offset);
}

}  // namespace

void ScoreKeys(const float* q, int64_t heads, const void* k, DType type, int64_t k_stride, int64_t n, int64_t hd,
               float scale, const float* lw, int64_t lw_stride, float* logits, int64_t logits_stride,
               int64_t prefetch_offset) {
  if (hd % 16 != 0)
    return avx2::ScoreKeys(q, heads, k, type, k_stride, n, hd, scale, lw, lw_stride, logits, logits_stride,
                           prefetch_offset);
  if (type == DType::kF16) {
    ScoreKeysAs(q, heads, static_cast<const uint16_t*>(k), k_stride, n, hd, scale, lw, lw_stride, logits, logits_stride,
                prefetch_offset);
  } else {
    ScoreKeysAs(q, heads, static_cast<const float*>(k), k_stride, n, hd, scale, lw, lw_stride, logits, logits_stride,
                prefetch_offset);
  }
}

void AccumulateValues(const float* p, int64_t p_stride, int64_t heads, const void* v, DType type, int64_t v_stride,
                      int64_t n, int64_t hd, float* acc, int64_t prefetch_offset) {
  if (hd % 16 != 0) return avx2::AccumulateValues(p, p_stride, heads, v, type, v_stride, n, hd, acc, prefetch_offset);
  if (type == DType::kF16) {
    AccumulateValuesAs(p, p_stride, heads, static_cast<const uint16_t*>(v), v_stride, n, hd, acc, prefetch_offset);
  } else {
    AccumulateValuesAs(p, p_stride, heads, static_cast<const float*>(v), v_stride, n, hd, acc, prefetch_offset);
  }
}

float ExpShiftedSum(float* x, int64_t n, float shift) {
  const __m512 s = _mm512_set1_ps(shift);
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 e = Exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), s));
    _mm512_storeu_ps(x + i, e);
    acc = _mm512_add_ps(acc, e);
  }
  if (i < n) {  // the tail, masked: lanes past n are neither read, written nor summed
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 e = _mm512_maskz_mov_ps(m, Exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), s)));
    _mm512_mask_storeu_ps(x + i, m, e);
    acc = _mm512_add_ps(acc, e);
  }
  return _mm512_reduce_add_ps(acc);
}

}  // namespace kvserve::cpu::avx512

KVSERVE_AVX512_END
