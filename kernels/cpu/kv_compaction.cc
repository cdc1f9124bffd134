// Compaction, CPU reference: each head's kept entries to its leading slots (front to back is
// safe in place because kept slots ascend, so slots[h, i] >= i), and the freed page list.
#include <algorithm>

#include "kernels/cpu/kv_compress_ops.h"
#include "kernels/kv_rows.h"

namespace kvserve::cpu {

void CompactKv(const PagedKv& kv, const int32_t* pages, int64_t len, const int32_t* slots, const float* new_log_w,
               int64_t k, std::vector<int32_t>* freed) {
  for (int64_t h = 0; h < kv.n_kv_heads; ++h) {
    for (int64_t i = 0; i < k; ++i) {
      const int64_t src = KvOffset(kv, pages, slots[h * k + i], h), dst = KvOffset(kv, pages, i, h);
      if (src != dst) {
        CopyKvRows(kv, kv.k, dst, src, 1);
        CopyKvRows(kv, kv.v, dst, src, 1);
      }
      kv.log_w[dst] = new_log_w ? new_log_w[h * k + i] : kv.log_w[src];
    }
  }
  if (freed) {
    const int64_t keep_pages = (k + kv.page_size - 1) / kv.page_size;
    const int64_t held = (len + kv.page_size - 1) / kv.page_size;
    freed->assign(pages + keep_pages, pages + std::max(keep_pages, held));
  }
}

void GatherPerHead(const float* src, int64_t src_stride, const int32_t* slots, int64_t heads, int64_t k, float* dst,
                   int64_t dst_stride) {
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < k; ++i) dst[h * dst_stride + i] = src[h * src_stride + slots[h * k + i]];
  }
}

}  // namespace kvserve::cpu
