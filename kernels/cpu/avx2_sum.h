// The sum of a vector's eight floats, shared by the AVX2 dot-product kernels.
#pragma once
#ifdef __AVX2__
#include <immintrin.h>

namespace kvserve::cpu {

inline float HorizontalSum(__m256 v) {
  __m128 lo = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  lo = _mm_hadd_ps(lo, lo);
  lo = _mm_hadd_ps(lo, lo);
  return _mm_cvtss_f32(lo);
}

}  // namespace kvserve::cpu
#endif
