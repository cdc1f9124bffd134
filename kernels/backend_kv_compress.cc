// Host-memory defaults of the Backend's KV compression ops: the CPU references.
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/dequantize.h"
#include "kernels/cpu/kv_compress_ops.h"

namespace kvserve {

void Backend::SnapKvScores(const PagedKv& kv, const int32_t* pages, int64_t len, const float* window, int64_t w,
                           const AttentionShape& shape, int64_t pool_kernel, float* scores) {
  cpu::SnapKvScores(kv, pages, len, window, w, shape.n_heads, shape.scale, pool_kernel, scores);
}

void Backend::ProjectedValueNorms(const PagedKv& kv, const int32_t* pages, int64_t first, int64_t len,
                                  const WeightView& wo, int64_t n_heads, float* norms, int64_t stride) {
  std::vector<float> w(static_cast<size_t>(wo.rows * wo.cols));
  const int64_t row_bytes = RowBytes(wo.dtype, wo.cols);
  for (int64_t o = 0; o < wo.rows; ++o) {
    DequantizeRow(wo.dtype, static_cast<const uint8_t*>(wo.data) + o * row_bytes, w.data() + o * wo.cols, wo.cols);
  }
  cpu::ProjectedValueNorms(kv, pages, first, len, w.data(), wo.rows, n_heads, norms, stride);
}

void Backend::CriticalKvScores(const float* base, const float* norms, int64_t norms_stride, int64_t heads,
                               int64_t len, int64_t n_first, float eps, float* merged) {
  cpu::CriticalKvScores(base, norms, norms_stride, heads, len, n_first, eps, merged);
}

void Backend::TopKPerHead(const float* scores, int64_t heads, int64_t len, int64_t k, int32_t* slots) {
  cpu::TopKPerHead(scores, heads, len, k, slots);
}

void Backend::CompactKv(const PagedKv& kv, const int32_t* pages, int64_t len, const int32_t* slots,
                        const float* new_log_w, int64_t k) {
  cpu::CompactKv(kv, pages, len, slots, new_log_w, k, nullptr);
}

void Backend::GatherPerHead(const float* src, int64_t src_stride, const int32_t* slots, int64_t heads, int64_t k,
                            float* dst, int64_t dst_stride) {
  cpu::GatherPerHead(src, src_stride, slots, heads, k, dst, dst_stride);
}

}  // namespace kvserve
