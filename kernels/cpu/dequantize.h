// Reference (scalar) dequantization of one row of any weight type kvserve reads, following
// the GGML block layouts bit for bit. Other kernels and the CUDA path are tested against it.
#pragma once
#include <cstdint>

#include "kernels/dtype.h"

namespace kvserve {

// dst[n] = the n values stored at src in type t. n must be a multiple of BlockElements(t)
// and src must hold RowBytes(t, n) bytes. Q8_1 (an activation-only type) is not handled.
void DequantizeRow(DType t, const void* src, float* dst, int64_t n);

}  // namespace kvserve
