// Host reads of K/V rows of paged storage, f32 or f16.
#include "kernels/kv_rows.h"

#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/half.h"

namespace kvserve {

namespace {

// fp16 <-> fp32 for n elements: F16C (in the x86-64-v3 baseline) eight at a time, the
// bit-exact scalar conversions of half.h for the tail. Both round to nearest even.
void WidenHalves(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
#ifdef __F16C__
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  }
#endif
  for (; i < n; ++i) dst[i] = Fp16ToFp32(src[i]);
}

void NarrowToHalves(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
#ifdef __F16C__
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
#endif
  for (; i < n; ++i) dst[i] = Fp32ToFp16(src[i]);
}

}  // namespace

bool IsKvDType(DType t) { return t == DType::kF32 || t == DType::kF16; }

void ReadKvRow(const PagedKv& kv, const void* base, int64_t row, float* out) {
  const int64_t d = kv.head_dim;
  if (kv.dtype == DType::kF16) {
    WidenHalves(static_cast<const uint16_t*>(base) + row * d, out, d);
  } else {
    std::memcpy(out, static_cast<const float*>(base) + row * d, sizeof(float) * d);
  }
}

void WriteKvRow(const PagedKv& kv, void* base, int64_t row, const float* in) {
  const int64_t d = kv.head_dim;
  if (kv.dtype == DType::kF16) {
    NarrowToHalves(in, static_cast<uint16_t*>(base) + row * d, d);
  } else {
    std::memcpy(static_cast<float*>(base) + row * d, in, sizeof(float) * d);
  }
}

void CopyKvRows(const PagedKv& kv, void* base, int64_t dst, int64_t src, int64_t n) {
  const int64_t row_bytes = kv.head_dim * kv.ElementBytes();
  auto* b = static_cast<uint8_t*>(base);
  std::memmove(b + dst * row_bytes, b + src * row_bytes, static_cast<size_t>(n * row_bytes));
}

}  // namespace kvserve
