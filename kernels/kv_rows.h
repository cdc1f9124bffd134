// Host access to rows of paged K/V storage of either dtype (kernels/backend.h PagedKv). A row
// is one (slot, KV head): index slot_index * n_kv_heads + head, head_dim elements.
#pragma once
#include <cstdint>

#include "kernels/backend.h"

namespace kvserve {

// True for the storage types PagedKv supports.
bool IsKvDType(DType t);

// out[head_dim] = row `row` of base (kv.k or kv.v), widened to fp32.
void ReadKvRow(const PagedKv& kv, const void* base, int64_t row, float* out);
// Row `row` of base = in[head_dim], rounded to nearest-even when the storage is fp16.
void WriteKvRow(const PagedKv& kv, void* base, int64_t row, const float* in);
// Rows [dst, dst + n) of base = rows [src, src + n) (memmove: the ranges may overlap).
void CopyKvRows(const PagedKv& kv, void* base, int64_t dst, int64_t src, int64_t n);

}  // namespace kvserve
