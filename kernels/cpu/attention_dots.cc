// Why intrinsics: the plain loops reduce each 64-wide dot through one dependent FMA chain and
// store the value accumulator back to memory for every key, which made batch-1 decode
// attention at 640 tokens cost as much as all the weight products. Here four keys are scored
// at once (four independent chains) and a head's output stays in registers across the run.
#include "kernels/cpu/attention_dots.h"

#include <immintrin.h>

#include <cmath>

#include "kernels/cpu/avx2_sum.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/kernel_table.h"

namespace kvserve::cpu {
namespace {

inline float Widen(float x) { return x; }
inline float Widen(uint16_t h) { return Fp16ToFp32(h); }

template <typename T>
void ScoreKeysPlain(const float* q, int64_t heads, const T* k, int64_t k_stride, int64_t n, int64_t hd,
                    float scale, const float* lw, int64_t lw_stride, float* logits, int64_t logits_stride) {
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < n; ++i) {
      float acc = 0.0f;
      for (int64_t d = 0; d < hd; ++d) acc += q[h * hd + d] * Widen(k[i * k_stride + d]);
      logits[h * logits_stride + i] = acc * scale + lw[i * lw_stride];
    }
  }
}

template <typename T>
void AccumulateValuesPlain(const float* p, int64_t p_stride, int64_t heads, const T* v, int64_t v_stride,
                           int64_t n, int64_t hd, float* acc) {
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < n; ++i) {
      const float w = p[h * p_stride + i];
      for (int64_t d = 0; d < hd; ++d) acc[h * hd + d] += w * Widen(v[i * v_stride + d]);
    }
  }
}

float ExpShiftedSumPlain(float* x, int64_t n, float shift) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += (x[i] = std::exp(x[i] - shift));
  return sum;
}

#ifdef __AVX2__
inline __m256 Load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 Load8(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

// exp(x) = 2^k * exp(r), k = round(x / ln 2), r = x - k ln 2 in [-ln2/2, ln2/2] (ln 2 split in
// two so r keeps its low bits), exp(r) by its degree-7 Taylor polynomial (error below 2^-26
// on that interval), 2^k built in the exponent field. Below -87.3 the result flushes to 0.
inline __m256 Exp8(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.33654f);
  const __m256 hi = _mm256_set1_ps(88.72283f);
  const __m256 is_low = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);  // also -inf
  x = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  const __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.0f / 5040);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(is_low, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

float ExpShiftedSumAvx2(float* x, int64_t n, float shift) {
  const __m256 s = _mm256_set1_ps(shift);
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = Exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), s));
    _mm256_storeu_ps(x + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  float sum = 0.0f;
  for (; i < n; ++i) sum += (x[i] = std::exp(x[i] - shift));
  return HorizontalSum(acc) + sum;
}


// The four lanes' totals of a0..a3, in that order.
inline __m128 Sum8x4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  const __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

template <typename T>
void ScoreKeysAvx2(const float* q, int64_t heads, const T* k, int64_t k_stride, int64_t n, int64_t hd,
                   float scale, const float* lw, int64_t lw_stride, float* logits, int64_t logits_stride) {
  const __m128 vscale = _mm_set1_ps(scale);
  for (int64_t h = 0; h < heads; ++h) {
    const float* qh = q + h * hd;
    float* out = logits + h * logits_stride;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
      const T* k0 = k + i * k_stride;
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      for (int64_t d = 0; d < hd; d += 8) {
        const __m256 qv = _mm256_loadu_ps(qh + d);
        a0 = _mm256_fmadd_ps(qv, Load8(k0 + d), a0);
        a1 = _mm256_fmadd_ps(qv, Load8(k0 + k_stride + d), a1);
        a2 = _mm256_fmadd_ps(qv, Load8(k0 + 2 * k_stride + d), a2);
        a3 = _mm256_fmadd_ps(qv, Load8(k0 + 3 * k_stride + d), a3);
      }
      const __m128 w = _mm_setr_ps(lw[i * lw_stride], lw[(i + 1) * lw_stride], lw[(i + 2) * lw_stride],
                                   lw[(i + 3) * lw_stride]);
      _mm_storeu_ps(out + i, _mm_fmadd_ps(Sum8x4(a0, a1, a2, a3), vscale, w));
    }
    // The last keys one at a time, summed and scaled exactly as in a group of four, so a key's
    // logit has the same bits wherever a run or block boundary puts it (--deterministic).
    for (; i < n; ++i) {
      __m256 a = _mm256_setzero_ps();
      for (int64_t d = 0; d < hd; d += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(qh + d), Load8(k + i * k_stride + d), a);
      const __m256 zero = _mm256_setzero_ps();
      out[i] = _mm_cvtss_f32(_mm_fmadd_ps(Sum8x4(a, zero, zero, zero), vscale, _mm_set_ss(lw[i * lw_stride])));
    }
  }
}

// Columns [d0, d0 + 8 * kVecs) of one head's output, kept in registers over all n values.
template <int kVecs, typename T>
inline void AccumulateColumns(const float* p, const T* v, int64_t v_stride, int64_t n, float* acc) {
  __m256 a[kVecs];
  for (int c = 0; c < kVecs; ++c) a[c] = _mm256_loadu_ps(acc + 8 * c);
  for (int64_t i = 0; i < n; ++i) {
    const __m256 w = _mm256_set1_ps(p[i]);
    const T* vi = v + i * v_stride;
    for (int c = 0; c < kVecs; ++c) a[c] = _mm256_fmadd_ps(w, Load8(vi + 8 * c), a[c]);
  }
  for (int c = 0; c < kVecs; ++c) _mm256_storeu_ps(acc + 8 * c, a[c]);
}

template <typename T>
void AccumulateValuesAvx2(const float* p, int64_t p_stride, int64_t heads, const T* v, int64_t v_stride,
                          int64_t n, int64_t hd, float* acc) {
  for (int64_t h = 0; h < heads; ++h) {
    const float* ph = p + h * p_stride;
    float* ah = acc + h * hd;
    int64_t d = 0;
    for (; d + 64 <= hd; d += 64) AccumulateColumns<8>(ph, v + d, v_stride, n, ah + d);
    for (; d < hd; d += 8) AccumulateColumns<1>(ph, v + d, v_stride, n, ah + d);
  }
}
#endif

template <typename T>
void ScoreKeysAs(const float* q, int64_t heads, const T* k, int64_t k_stride, int64_t n, int64_t hd, float scale,
                 const float* lw, int64_t lw_stride, float* logits, int64_t logits_stride) {
#ifdef __AVX2__
  if (hd % 8 == 0) return ScoreKeysAvx2(q, heads, k, k_stride, n, hd, scale, lw, lw_stride, logits, logits_stride);
#endif
  ScoreKeysPlain(q, heads, k, k_stride, n, hd, scale, lw, lw_stride, logits, logits_stride);
}

template <typename T>
void AccumulateValuesAs(const float* p, int64_t p_stride, int64_t heads, const T* v, int64_t v_stride, int64_t n,
                        int64_t hd, float* acc) {
#ifdef __AVX2__
  if (hd % 8 == 0) return AccumulateValuesAvx2(p, p_stride, heads, v, v_stride, n, hd, acc);
#endif
  AccumulateValuesPlain(p, p_stride, heads, v, v_stride, n, hd, acc);
}

}  // namespace

namespace avx2 {

void ScoreKeys(const float* q, int64_t heads, const void* k, DType type, int64_t k_stride, int64_t n, int64_t hd,
               float scale, const float* lw, int64_t lw_stride, float* logits, int64_t logits_stride) {
  if (type == DType::kF16) {
    ScoreKeysAs(q, heads, static_cast<const uint16_t*>(k), k_stride, n, hd, scale, lw, lw_stride, logits,
                logits_stride);
  } else {
    ScoreKeysAs(q, heads, static_cast<const float*>(k), k_stride, n, hd, scale, lw, lw_stride, logits, logits_stride);
  }
}

void AccumulateValues(const float* p, int64_t p_stride, int64_t heads, const void* v, DType type, int64_t v_stride,
                      int64_t n, int64_t hd, float* acc) {
  if (type == DType::kF16) {
    AccumulateValuesAs(p, p_stride, heads, static_cast<const uint16_t*>(v), v_stride, n, hd, acc);
  } else {
    AccumulateValuesAs(p, p_stride, heads, static_cast<const float*>(v), v_stride, n, hd, acc);
  }
}

float ExpShiftedSum(float* x, int64_t n, float shift) {
#ifdef __AVX2__
  if (n >= 8) return ExpShiftedSumAvx2(x, n, shift);
#endif
  return ExpShiftedSumPlain(x, n, shift);
}

}  // namespace avx2

void ScoreKeys(const float* q, int64_t heads, const void* k, DType type, int64_t k_stride, int64_t n, int64_t hd,
               float scale, const float* lw, int64_t lw_stride, float* logits, int64_t logits_stride) {
  ActiveKernels().score_keys(q, heads, k, type, k_stride, n, hd, scale, lw, lw_stride, logits, logits_stride);
}

void AccumulateValues(const float* p, int64_t p_stride, int64_t heads, const void* v, DType type, int64_t v_stride,
                      int64_t n, int64_t hd, float* acc) {
  ActiveKernels().accumulate_values(p, p_stride, heads, v, type, v_stride, n, hd, acc);
}

float ExpShiftedSum(float* x, int64_t n, float shift) { return ActiveKernels().exp_shifted_sum(x, n, shift); }

}  // namespace kvserve::cpu
