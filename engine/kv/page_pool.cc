// Page pool bookkeeping: a free list plus an in-use bit per page.
#include "engine/kv/page_pool.h"

#include <algorithm>
#include <cassert>

#include "absl/strings/str_cat.h"

namespace kvserve {

PagePool::PagePool(const PagePoolShape& shape)
    : shape_(shape),
      k_(static_cast<size_t>(shape.num_pages * shape.page_size * shape.n_kv_heads * shape.head_dim)),
      v_(k_.size()),
      log_w_(static_cast<size_t>(shape.num_pages * shape.page_size * shape.n_kv_heads)),
      in_use_(static_cast<size_t>(shape.num_pages), 0) {
  free_.reserve(static_cast<size_t>(shape.num_pages));
  for (int64_t p = shape.num_pages - 1; p >= 0; --p) free_.push_back(static_cast<int32_t>(p));
}

int64_t PagePool::PageBytes(const PagePoolShape& s) {
  return static_cast<int64_t>(sizeof(float)) * s.page_size * s.n_kv_heads * (2 * s.head_dim + 1);
}

absl::Status PagePool::Allocate(int64_t n, std::vector<int32_t>* out) {
  if (n > free_pages()) {
    return absl::ResourceExhaustedError(absl::StrCat("KV page pool exhausted: need ", n,
                                                     " pages, ", free_pages(), " free of ",
                                                     shape_.num_pages));
  }
  for (int64_t i = 0; i < n; ++i) {
    const int32_t p = free_.back();
    free_.pop_back();
    in_use_[p] = 1;
    out->push_back(p);
  }
  peak_used_ = std::max(peak_used_, shape_.num_pages - free_pages());
  return absl::OkStatus();
}

void PagePool::Free(absl::Span<const int32_t> pages) {
  for (int32_t p : pages) {
    assert(in_use_[p] && "page freed twice");
    in_use_[p] = 0;
    free_.push_back(p);
  }
}

PagePoolStats PagePool::stats() const {
  return {shape_.num_pages, shape_.num_pages - free_pages(), peak_used_, PageBytes(shape_)};
}

PagedKv PagePool::view() {
  return {k_.data(), v_.data(), log_w_.data(), shape_.page_size, shape_.n_kv_heads, shape_.head_dim};
}

void SequenceKv::Release(PagePool& pool) {
  for (auto& pages : layer_pages) {
    pool.Free(pages);
    pages.clear();
  }
  std::fill(layer_len.begin(), layer_len.end(), 0);
}

}  // namespace kvserve
