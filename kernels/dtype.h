// Element types of weight tensors, numbered as in GGML so GGUF type ids map directly.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kvserve {

enum class DType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ8_0 = 8,
  kQ8_1 = 9,  // activations only: the partner of Q4_1 in quantized dot products
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kBF16 = 30,
};

// Elements per block (1 for plain float types).
int64_t BlockElements(DType t);
// Bytes per block.
int64_t BlockBytes(DType t);
// Bytes of a row of n elements; n must be a multiple of BlockElements(t).
inline int64_t RowBytes(DType t, int64_t n) { return n / BlockElements(t) * BlockBytes(t); }
std::string_view DTypeName(DType t);
// True for the ids above that kvserve can read from a file.
bool IsSupportedWeightType(uint32_t ggml_type);

}  // namespace kvserve
