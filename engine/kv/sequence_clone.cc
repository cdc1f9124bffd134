// Deep copy of one sequence's cache into fresh pages of the same pool.
#include "engine/kv/sequence_clone.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "kernels/kv_rows.h"

namespace kvserve {

absl::StatusOr<SequenceKv> CloneSequence(PagePool& pool, const SequenceKv& src) {
  if (!pool.host_memory()) {
    return absl::UnimplementedError("cloning a sequence whose KV pages live in device memory");
  }
  const int64_t need = src.pages_held();
  if (need > pool.unpromised_pages()) {
    return absl::ResourceExhaustedError(absl::StrCat("cloning a sequence needs ", need, " KV pages, the pool has ",
                                                     pool.unpromised_pages(), " free"));
  }
  const int64_t n_layers = static_cast<int64_t>(src.layer_pages.size());
  SequenceKv dst(n_layers);
  PagedKv kv = pool.view();
  // A page is contiguous in each of K, V and log_w, so whole pages copy as three blocks.
  const int64_t page_rows = kv.page_size * kv.n_kv_heads, page_weights = page_rows;
  for (int64_t l = 0; l < n_layers; ++l) {
    const std::vector<int32_t>& from = src.layer_pages[l];
    std::vector<int32_t>& to = dst.layer_pages[l];
    // Cannot fail: the pages were counted above and nothing else draws from the pool here.
    if (absl::Status st = pool.Allocate(static_cast<int64_t>(from.size()), &to); !st.ok()) {
      dst.Release(pool);
      return st;
    }
    for (size_t i = 0; i < from.size(); ++i) {
      const int64_t s = from[i], d = to[i];
      CopyKvRows(kv, kv.k, d * page_rows, s * page_rows, page_rows);
      CopyKvRows(kv, kv.v, d * page_rows, s * page_rows, page_rows);
      std::copy_n(kv.log_w + s * page_weights, page_weights, kv.log_w + d * page_weights);
    }
    dst.layer_len[l] = src.layer_len[l];
  }
  return dst;
}

}  // namespace kvserve
