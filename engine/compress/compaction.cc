#include "engine/compress/compaction.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kvserve {
namespace {

absl::Status CheckSelection(const PagePool& pool, const SequenceKv& seq, int64_t layer, const Selection& sel) {
  const int64_t heads = pool.shape().n_kv_heads, len = seq.layer_len[layer], n = sel.n_keep;
  if (n < 0 || n > len || static_cast<int64_t>(sel.slots.size()) != heads * n ||
      static_cast<int64_t>(sel.log_w.size()) != heads * n) {
    return absl::InvalidArgumentError(absl::StrCat("selection of ", n, " slots per head (", sel.slots.size(),
                                                   " total) does not fit a layer of ", len, " slots and ", heads,
                                                   " KV heads"));
  }
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < n; ++i) {
      const int32_t s = sel.slots[h * n + i];
      if (s < 0 || s >= len || (i > 0 && s <= sel.slots[h * n + i - 1])) {
        return absl::InvalidArgumentError(
            absl::StrCat("selected slot ", s, " of head ", h, " is out of order or outside [0, ", len, ")"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CompactLayer(Backend& backend, PagePool& pool, SequenceKv& seq, int64_t layer, const Selection& sel) {
  if (absl::Status st = CheckSelection(pool, seq, layer, sel); !st.ok()) return st;
  const int64_t n = sel.n_keep, heads = pool.shape().n_kv_heads;
  if (n > 0) {
    // Per-call buffers: this serves selections made on the host, which have already waited
    // for the device to read the pages, so the allocation's synchronization costs nothing new
    // (on the CPU backend they are plain host memory).
    const int64_t slot_bytes = static_cast<int64_t>(sizeof(int32_t)) * heads * n;
    const int64_t log_w_bytes = static_cast<int64_t>(sizeof(float)) * heads * n;
    auto* slots = static_cast<int32_t*>(backend.Allocate(slot_bytes));
    auto* log_w = static_cast<float*>(backend.Allocate(log_w_bytes));
    backend.CopyIn(slots, sel.slots.data(), slot_bytes);
    backend.CopyIn(log_w, sel.log_w.data(), log_w_bytes);
    backend.CompactKv(pool.view(), seq.layer_pages[layer].data(), seq.layer_len[layer], slots, log_w, n);
    backend.Deallocate(slots);
    backend.Deallocate(log_w);
  }
  seq.TruncateLayer(pool, layer, n);
  return absl::OkStatus();
}

}  // namespace kvserve
