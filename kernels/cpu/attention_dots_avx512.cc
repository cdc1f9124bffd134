// AVX-512 versions of the attention inner loops (attention_dots.h) for head_dim % 16 == 0:
// 16 lanes per instruction, so a 64-wide head is 4 registers instead of 8. Other head
// sizes go to the AVX2 versions in attention_dots.cc.
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "kernels/cpu/kernel_table.h"
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

template <typename T>
void ScoreKeysAs(const float* q, int64_t heads, const T* k, int64_t k_stride, int64_t n, int64_t hd, float scale,
                 const float* lw, int64_t lw_stride, float* logits, int64_t logits_stride) {
  const __m128 vscale = _mm_set1_ps(scale);
  for (int64_t h = 0; h < heads; ++h) {
    const float* qh = q + h * hd;
    float* out = logits + h * logits_stride;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
      const T* k0 = k + i * k_stride;
      __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      for (int64_t d = 0; d < hd; d += 16) {
        const __m512 qv = _mm512_loadu_ps(qh + d);
        a0 = _mm512_fmadd_ps(qv, Load16(k0 + d), a0);
        a1 = _mm512_fmadd_ps(qv, Load16(k0 + k_stride + d), a1);
        a2 = _mm512_fmadd_ps(qv, Load16(k0 + 2 * k_stride + d), a2);
        a3 = _mm512_fmadd_ps(qv, Load16(k0 + 3 * k_stride + d), a3);
      }
      const __m128 w = _mm_setr_ps(lw[i * lw_stride], lw[(i + 1) * lw_stride], lw[(i + 2) * lw_stride],
                                   lw[(i + 3) * lw_stride]);
      _mm_storeu_ps(out + i, _mm_fmadd_ps(Sum16x4(a0, a1, a2, a3), vscale, w));
    }
    // The last keys one at a time, summed and scaled exactly as in a group of four, so a key's
    // logit has the same bits wherever a run or block boundary puts it (--deterministic).
    for (; i < n; ++i) {
      __m512 a = _mm512_setzero_ps();
      for (int64_t d = 0; d < hd; d += 16) a = _mm512_fmadd_ps(_mm512_loadu_ps(qh + d), Load16(k + i * k_stride + d), a);
      const __m512 zero = _mm512_setzero_ps();
      out[i] = _mm_cvtss_f32(_mm_fmadd_ps(Sum16x4(a, zero, zero, zero), vscale, _mm_set_ss(lw[i * lw_stride])));
    }
  }
}

// Columns [0, 16 * kVecs) of one head's output, kept in registers over all n values.
template <int kVecs, typename T>
inline void AccumulateColumns(const float* p, const T* v, int64_t v_stride, int64_t n, float* acc) {
  __m512 a[kVecs];
  for (int c = 0; c < kVecs; ++c) a[c] = _mm512_loadu_ps(acc + 16 * c);
  for (int64_t i = 0; i < n; ++i) {
    const __m512 w = _mm512_set1_ps(p[i]);
    const T* vi = v + i * v_stride;
    for (int c = 0; c < kVecs; ++c) a[c] = _mm512_fmadd_ps(w, Load16(vi + 16 * c), a[c]);
  }
  for (int c = 0; c < kVecs; ++c) _mm512_storeu_ps(acc + 16 * c, a[c]);
}

template <typename T>
void AccumulateValuesAs(const float* p, int64_t p_stride, int64_t heads, const T* v, int64_t v_stride, int64_t n,
                        int64_t hd, float* acc) {
  for (int64_t h = 0; h < heads; ++h) {
    const float* ph = p + h * p_stride;
    float* ah = acc + h * hd;
    int64_t d = 0;
    for (; d + 128 <= hd; d += 128) AccumulateColumns<8>(ph, v + d, v_stride, n, ah + d);
    if (hd - d == 64) {
      AccumulateColumns<4>(ph, v + d, v_stride, n, ah + d);
      continue;
    }
    for (; d < hd; d += 16) AccumulateColumns<1>(ph, v + d, v_stride, n, ah + d);
  }
}

}  // namespace

void ScoreKeys(const float* q, int64_t heads, const void* k, DType type, int64_t k_stride, int64_t n, int64_t hd,
               float scale, const float* lw, int64_t lw_stride, float* logits, int64_t logits_stride) {
  if (hd % 16 != 0) return avx2::ScoreKeys(q, heads, k, type, k_stride, n, hd, scale, lw, lw_stride, logits, logits_stride);
  if (type == DType::kF16) {
    ScoreKeysAs(q, heads, static_cast<const uint16_t*>(k), k_stride, n, hd, scale, lw, lw_stride, logits,
                logits_stride);
  } else {
    ScoreKeysAs(q, heads, static_cast<const float*>(k), k_stride, n, hd, scale, lw, lw_stride, logits, logits_stride);
  }
}

void AccumulateValues(const float* p, int64_t p_stride, int64_t heads, const void* v, DType type, int64_t v_stride,
                      int64_t n, int64_t hd, float* acc) {
  if (hd % 16 != 0) return avx2::AccumulateValues(p, p_stride, heads, v, type, v_stride, n, hd, acc);
  if (type == DType::kF16) {
    AccumulateValuesAs(p, p_stride, heads, static_cast<const uint16_t*>(v), v_stride, n, hd, acc);
  } else {
    AccumulateValuesAs(p, p_stride, heads, static_cast<const float*>(v), v_stride, n, hd, acc);
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
