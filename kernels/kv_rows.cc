#include "kernels/kv_rows.h"

#include <cstring>

#include "kernels/cpu/half.h"

namespace kvserve {

bool IsKvDType(DType t) { return t == DType::kF32 || t == DType::kF16; }

void ReadKvRow(const PagedKv& kv, const void* base, int64_t row, float* out) {
  const int64_t d = kv.head_dim;
  if (kv.dtype == DType::kF16) {
    const uint16_t* src = static_cast<const uint16_t*>(base) + row * d;
    for (int64_t i = 0; i < d; ++i) out[i] = Fp16ToFp32(src[i]);
  } else {
    std::memcpy(out, static_cast<const float*>(base) + row * d, sizeof(float) * d);
  }
}

void WriteKvRow(const PagedKv& kv, void* base, int64_t row, const float* in) {
  const int64_t d = kv.head_dim;
  if (kv.dtype == DType::kF16) {
    uint16_t* dst = static_cast<uint16_t*>(base) + row * d;
    for (int64_t i = 0; i < d; ++i) dst[i] = Fp32ToFp16(in[i]);
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
