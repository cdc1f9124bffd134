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
#include "kernels/cpu/prefetch.h"

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

// Logits of kHeads query heads (q [kHeads, hd]) for keys [0, n): each key is loaded (and for
// f16 pages widened) once for the heads that share it. Every (head, key) dot is summed in the
// same order as one head alone, so the bits do not depend on kHeads.
template <int kHeads, typename T>
void ScoreHeadGroupAvx2(const float* q, const T* k, int64_t k_stride, int64_t n, int64_t hd, float scale,
                        const float* lw, int64_t lw_stride, float* logits, int64_t logits_stride,
                        int64_t prefetch_offset) {
  const __m128 vscale = _mm_set1_ps(scale);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const T* k0 = k + i * k_stride;
    if (prefetch_offset != 0) {
      for (int j = 0; j < 4; ++j)
        PrefetchKv(k0, prefetch_offset + j * k_stride * int64_t{sizeof(T)}, hd * int64_t{sizeof(T)});
    }
    __m256 a[kHeads][4];
    for (int h = 0; h < kHeads; ++h) {
      for (int j = 0; j < 4; ++j) a[h][j] = _mm256_setzero_ps();
    }
    for (int64_t d = 0; d < hd; d += 8) {
      const __m256 k_0 = Load8(k0 + d), k_1 = Load8(k0 + k_stride + d), k_2 = Load8(k0 + 2 * k_stride + d),
                   k_3 = Load8(k0 + 3 * k_stride + d);
      for (int h = 0; h < kHeads; ++h) {
        const __m256 qv = _mm256_loadu_ps(q + h * hd + d);
        a[h][0] = _mm256_fmadd_ps(qv, k_0, a[h][0]);
        a[h][1] = _mm256_fmadd_ps(qv, k_1, a[h][1]);
        a[h][2] = _mm256_fmadd_ps(qv, k_2, a[h][2]);
        a[h][3] = _mm256_fmadd_ps(qv, k_3, a[h][3]);
      }
    }
    const __m128 w = _mm_setr_ps(lw[i * lw_stride], lw[(i + 1) * lw_stride], lw[(i + 2) * lw_stride],
                                 lw[(i + 3) * lw_stride]);
    for (int h = 0; h < kHeads; ++h) {
      _mm_storeu_ps(logits + h * logits_stride + i, _mm_fmadd_ps(Sum8x4(a[h][0], a[h][1], a[h][2], a[h][3]), vscale, w));
    }
  }
  // The last keys one at a time, summed and scaled exactly as in a group of four, so a key's
  // logit has the same bits wherever a run or block boundary puts it (--deterministic).
  for (; i < n; ++i) {
    for (int h = 0; h < kHeads; ++h) {
      __m256 a = _mm256_setzero_ps();
      for (int64_t d = 0; d < hd; d += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(q + h * hd + d), Load8(k + i * k_stride + d), a);
      const __m256 zero = _mm256_setzero_ps();
      logits[h * logits_stride + i] =
          _mm_cvtss_f32(_mm_fmadd_ps(Sum8x4(a, zero, zero, zero), vscale, _mm_set_ss(lw[i * lw_stride])));
    }
  }
}

// Logits of three query heads (one KV group of SmolLM2, and of any model whose group size is a
// multiple of three) for keys [0, n), four keys at a time: each key row is widened once for
// the three heads, and twelve independent accumulators keep both FMA units busy where nine
// (three keys) left each FMA waiting on the one before it (5 cycles on Zen 2). Three query
// vectors, twelve accumulators and a key are AVX2's 16 registers; the loops are unrolled by
// hand (the pragmas) so that GCC keeps them there. Every (head, key) dot is summed exactly as
// in ScoreHeadGroupAvx2, so the bits do not depend on which kernel ran.
template <typename T>
void ScoreThreeHeadsAvx2(const float* q, const T* k, int64_t k_stride, int64_t n, int64_t hd, float scale,
                         const float* lw, int64_t lw_stride, float* logits, int64_t logits_stride,
                         int64_t prefetch_offset) {
  constexpr int kHeads = 3, kKeys = 4;
  const __m128 vscale = _mm_set1_ps(scale);
  int64_t i = 0;
  for (; i + kKeys <= n; i += kKeys) {
    const T* k0 = k + i * k_stride;
    if (prefetch_offset != 0) {
#pragma GCC unroll 4
      for (int j = 0; j < kKeys; ++j) {
        PrefetchKv(k0, prefetch_offset + j * k_stride * int64_t{sizeof(T)}, hd * int64_t{sizeof(T)});
      }
    }
    __m256 a[kHeads][kKeys];
#pragma GCC unroll 4
    for (int h = 0; h < kHeads; ++h) {
#pragma GCC unroll 4
      for (int j = 0; j < kKeys; ++j) a[h][j] = _mm256_setzero_ps();
    }
    for (int64_t d = 0; d < hd; d += 8) {
      const __m256 q0 = _mm256_loadu_ps(q + d), q1 = _mm256_loadu_ps(q + hd + d), q2 = _mm256_loadu_ps(q + 2 * hd + d);
#pragma GCC unroll 4
      for (int j = 0; j < kKeys; ++j) {
        const __m256 kj = Load8(k0 + j * k_stride + d);
        a[0][j] = _mm256_fmadd_ps(q0, kj, a[0][j]);
        a[1][j] = _mm256_fmadd_ps(q1, kj, a[1][j]);
        a[2][j] = _mm256_fmadd_ps(q2, kj, a[2][j]);
      }
    }
    const __m128 w = _mm_setr_ps(lw[i * lw_stride], lw[(i + 1) * lw_stride], lw[(i + 2) * lw_stride],
                                 lw[(i + 3) * lw_stride]);
#pragma GCC unroll 4
    for (int h = 0; h < kHeads; ++h) {
      _mm_storeu_ps(logits + h * logits_stride + i, _mm_fmadd_ps(Sum8x4(a[h][0], a[h][1], a[h][2], a[h][3]), vscale, w));
    }
  }
  // The last keys (fewer than four): the shared kernel's one-key tail, the same arithmetic.
  if (i < n) {
    ScoreHeadGroupAvx2<kHeads>(q, k + i * k_stride, k_stride, n - i, hd, scale, lw + i * lw_stride, lw_stride,
                               logits + i, logits_stride, prefetch_offset);
  }
}

// Two heads share a pass over the keys: eight accumulators, four keys and a query vector fit
// AVX2's 16 registers (three heads would spill).
template <typename T>
void ScoreKeysAvx2(const float* q, int64_t heads, const T* k, int64_t k_stride, int64_t n, int64_t hd, float scale,
                   const float* lw, int64_t lw_stride, float* logits, int64_t logits_stride, int64_t prefetch_offset) {
  int64_t h = 0;
  if (heads % 3 == 0) {
    for (; h < heads; h += 3) {
      ScoreThreeHeadsAvx2(q + h * hd, k, k_stride, n, hd, scale, lw, lw_stride, logits + h * logits_stride,
                          logits_stride, prefetch_offset);
    }
    return;
  }
  for (; h + 2 <= heads; h += 2) {
    ScoreHeadGroupAvx2<2>(q + h * hd, k, k_stride, n, hd, scale, lw, lw_stride, logits + h * logits_stride,
                          logits_stride, prefetch_offset);
  }
  if (h < heads) {
    ScoreHeadGroupAvx2<1>(q + h * hd, k, k_stride, n, hd, scale, lw, lw_stride, logits + h * logits_stride,
                          logits_stride, prefetch_offset);
  }
}

// Columns [0, 8 * kVecs) of kHeads heads' outputs (acc rows hd apart), kept in registers over
// all n values; each value row is widened once for the heads. Per output element the sum runs
// over i in order, as with one head alone, so the bits do not depend on the grouping.
template <int kHeads, int kVecs, typename T>
inline void AccumulateColumns(const float* p, int64_t p_stride, const T* v, int64_t v_stride, int64_t n, int64_t hd,
                              float* acc, int64_t prefetch_offset) {
  // The loops that load and store the accumulators are unrolled by hand (the pragmas): left to
  // GCC 12 at -O3, it copied them as memory, kept `a` on the stack and stored every
  // accumulator for every value row, one store per FMA, which bounded the whole loop.
  __m256 a[kHeads][kVecs];
#pragma GCC unroll 16
  for (int h = 0; h < kHeads; ++h) {
#pragma GCC unroll 16
    for (int c = 0; c < kVecs; ++c) a[h][c] = _mm256_loadu_ps(acc + h * hd + 8 * c);
  }
  for (int64_t i = 0; i < n; ++i) {
    const T* vi = v + i * v_stride;
    if (prefetch_offset != 0) PrefetchKv(vi, prefetch_offset, kVecs * 8 * int64_t{sizeof(T)});
    // The heads' weights first, then one widened value vector at a time: three heads x four
    // vectors then take 12 accumulators + 3 weights + 1 value, AVX2's 16 registers.
    __m256 w[kHeads];
    for (int h = 0; h < kHeads; ++h) w[h] = _mm256_set1_ps(p[h * p_stride + i]);
    for (int c = 0; c < kVecs; ++c) {
      const __m256 x = Load8(vi + 8 * c);
      for (int h = 0; h < kHeads; ++h) a[h][c] = _mm256_fmadd_ps(w[h], x, a[h][c]);
    }
  }
#pragma GCC unroll 16
  for (int h = 0; h < kHeads; ++h) {
#pragma GCC unroll 16
    for (int c = 0; c < kVecs; ++c) _mm256_storeu_ps(acc + h * hd + 8 * c, a[h][c]);
  }
}

// Columns [0, 8 * kVecs) of every head, two heads at a time (8 accumulators, four values and a
// weight in 16 registers).
template <int kVecs, typename T>
void AccumulateColumnsAllHeads(const float* p, int64_t p_stride, int64_t heads, const T* v, int64_t v_stride, int64_t n,
                               int64_t hd, float* acc, int64_t prefetch_offset) {
  int64_t h = 0;
  for (; h + 2 <= heads; h += 2)
    AccumulateColumns<2, kVecs>(p + h * p_stride, p_stride, v, v_stride, n, hd, acc + h * hd, prefetch_offset);
  if (h < heads)
    AccumulateColumns<1, kVecs>(p + h * p_stride, p_stride, v, v_stride, n, hd, acc + h * hd, prefetch_offset);
}

template <typename T>
void AccumulateValuesAvx2(const float* p, int64_t p_stride, int64_t heads, const T* v, int64_t v_stride, int64_t n,
                          int64_t hd, float* acc, int64_t prefetch_offset) {
  if (heads % 3 == 0) {
    // Three heads (a SmolLM2 KV group) per pass, 32 columns at a time (twelve independent
    // accumulators: with six, each FMA waited on the one before it): each value row is widened
    // once for the group (with two heads per pass, the third head widened it again).
    for (int64_t h = 0; h < heads; h += 3) {
      int64_t d = 0;
      for (; d + 32 <= hd; d += 32) {
        AccumulateColumns<3, 4>(p + h * p_stride, p_stride, v + d, v_stride, n, hd, acc + h * hd + d, prefetch_offset);
      }
      for (; d + 16 <= hd; d += 16) {
        AccumulateColumns<3, 2>(p + h * p_stride, p_stride, v + d, v_stride, n, hd, acc + h * hd + d, prefetch_offset);
      }
      for (; d < hd; d += 8)
        AccumulateColumns<3, 1>(p + h * p_stride, p_stride, v + d, v_stride, n, hd, acc + h * hd + d, prefetch_offset);
    }
    return;
  }
  int64_t d = 0;
  for (; d + 32 <= hd; d += 32)
    AccumulateColumnsAllHeads<4>(p, p_stride, heads, v + d, v_stride, n, hd, acc + d, prefetch_offset);
  for (; d < hd; d += 8)
    AccumulateColumnsAllHeads<1>(p, p_stride, heads, v + d, v_stride, n, hd, acc + d, prefetch_offset);
}
#endif

template <typename T>
void ScoreKeysAs(const float* q, int64_t heads, const T* k, int64_t k_stride, int64_t n, int64_t hd, float scale,
                 const float* lw, int64_t lw_stride, float* logits, int64_t logits_stride, int64_t prefetch_offset) {
#ifdef __AVX2__
  if (hd % 8 == 0)
    return ScoreKeysAvx2(q, heads, k, k_stride, n, hd, scale, lw, lw_stride, logits, logits_stride, prefetch_offset);
#endif
  ScoreKeysPlain(q, heads, k, k_stride, n, hd, scale, lw, lw_stride, logits, logits_stride);
}

template <typename T>
void AccumulateValuesAs(const float* p, int64_t p_stride, int64_t heads, const T* v, int64_t v_stride, int64_t n,
                        int64_t hd, float* acc, int64_t prefetch_offset) {
#ifdef __AVX2__
  if (hd % 8 == 0) return AccumulateValuesAvx2(p, p_stride, heads, v, v_stride, n, hd, acc, prefetch_offset);
#endif
  AccumulateValuesPlain(p, p_stride, heads, v, v_stride, n, hd, acc);
}

}  // namespace

namespace avx2 {

void ScoreKeys(const float* q, int64_t heads, const void* k, DType type, int64_t k_stride, int64_t n, int64_t hd,
               float scale, const float* lw, int64_t lw_stride, float* logits, int64_t logits_stride,
               int64_t prefetch_offset) {
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
  if (type == DType::kF16) {
    AccumulateValuesAs(p, p_stride, heads, static_cast<const uint16_t*>(v), v_stride, n, hd, acc, prefetch_offset);
  } else {
    AccumulateValuesAs(p, p_stride, heads, static_cast<const float*>(v), v_stride, n, hd, acc, prefetch_offset);
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
               float scale, const float* lw, int64_t lw_stride, float* logits, int64_t logits_stride,
               int64_t prefetch_offset) {
  ActiveKernels().score_keys(q, heads, k, type, k_stride, n, hd, scale, lw, lw_stride, logits, logits_stride,
                             prefetch_offset);
}

void AccumulateValues(const float* p, int64_t p_stride, int64_t heads, const void* v, DType type, int64_t v_stride,
                      int64_t n, int64_t hd, float* acc, int64_t prefetch_offset) {
  ActiveKernels().accumulate_values(p, p_stride, heads, v, type, v_stride, n, hd, acc, prefetch_offset);
}

float ExpShiftedSum(float* x, int64_t n, float shift) { return ActiveKernels().exp_shifted_sum(x, n, shift); }

}  // namespace kvserve::cpu
