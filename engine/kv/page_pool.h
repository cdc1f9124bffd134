// The global pool of KV pages. A page holds page_size tokens of one layer: K and V as
// [page_size, n_kv_heads, head_dim] plus a log-weight per (slot, head). No math in here.
#pragma once
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/backend.h"

namespace kvserve {

struct PagePoolShape {
  int64_t num_pages = 0;
  int64_t page_size = 16;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
};

struct PagePoolStats {
  int64_t pages_total = 0;
  int64_t pages_used = 0;
  int64_t pages_peak = 0;
  int64_t page_bytes = 0;
};

class PagePool {
 public:
  explicit PagePool(const PagePoolShape& shape);
  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;

  // Appends n free pages to *out, or fails with RESOURCE_EXHAUSTED and takes none.
  absl::Status Allocate(int64_t n, std::vector<int32_t>* out);
  // Returns pages to the pool; each must be in use.
  void Free(absl::Span<const int32_t> pages);

  int64_t free_pages() const { return static_cast<int64_t>(free_.size()); }
  const PagePoolShape& shape() const { return shape_; }
  PagePoolStats stats() const;
  // The storage as kernels see it.
  PagedKv view();

  // Bytes one page takes: K, V and log-weights.
  static int64_t PageBytes(const PagePoolShape& shape);

 private:
  PagePoolShape shape_;
  std::vector<float> k_, v_, log_w_;
  std::vector<int32_t> free_;     // LIFO: recently freed pages are warm in cache
  std::vector<uint8_t> in_use_;
  int64_t peak_used_ = 0;
};

// One sequence's cache: per layer an ordered page list and a length in slots.
struct SequenceKv {
  std::vector<std::vector<int32_t>> layer_pages;
  std::vector<int64_t> layer_len;

  explicit SequenceKv(int64_t n_layers) : layer_pages(n_layers), layer_len(n_layers, 0) {}
  // Gives every page back to the pool and empties the sequence.
  void Release(PagePool& pool);
};

}  // namespace kvserve
