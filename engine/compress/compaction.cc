#include "engine/compress/compaction.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kvserve {

absl::Status CompactLayer(PagePool& pool, SequenceKv& seq, int64_t layer, const Selection& sel) {
  const PagedKv kv = pool.view();
  const int64_t heads = kv.n_kv_heads, d = kv.head_dim, len = seq.layer_len[layer], n = sel.n_keep;
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
  const LayerKv L{kv, seq.layer_pages[layer], len};
  for (int64_t h = 0; h < heads; ++h) {
    // Slots ascend and sel[i] >= i, so copying front to back never overwrites an entry
    // that is still to be read.
    for (int64_t i = 0; i < n; ++i) {
      const int64_t src = L.Offset(sel.slots[h * n + i], h), dst = L.Offset(i, h);
      if (src != dst) {
        std::copy_n(kv.k + src * d, d, kv.k + dst * d);
        std::copy_n(kv.v + src * d, d, kv.v + dst * d);
      }
      kv.log_w[dst] = sel.log_w[h * n + i];
    }
  }
  seq.TruncateLayer(pool, layer, n);
  return absl::OkStatus();
}

}  // namespace kvserve
