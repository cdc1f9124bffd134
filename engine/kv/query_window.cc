// The per-layer ring of a sequence's most recent post-RoPE queries.
#include "engine/kv/query_window.h"

#include <algorithm>

namespace kvserve {

QueryWindow::QueryWindow(int64_t n_layers, int64_t capacity, int64_t n_heads, int64_t head_dim)
    : capacity_(capacity), row_(n_heads * head_dim),
      rows_(n_layers), next_(n_layers, 0), count_(n_layers, 0) {}

void QueryWindow::Append(int64_t layer, const float* q, int64_t n) {
  if (capacity_ == 0) return;
  // Rows that would be overwritten within this same call are skipped.
  const int64_t skip = std::max<int64_t>(0, n - capacity_);
  std::vector<float>& ring = rows_[layer];
  // Allocated on first use: a request waiting for admission holds no window memory.
  if (ring.empty()) ring.resize(static_cast<size_t>(capacity_ * row_));
  for (int64_t i = skip; i < n; ++i) {
    std::copy_n(q + i * row_, row_, ring.data() + next_[layer] * row_);
    next_[layer] = (next_[layer] + 1) % capacity_;
  }
  count_[layer] = std::min(capacity_, count_[layer] + n);
}

void QueryWindow::CopyOrdered(int64_t layer, std::vector<float>* out) const {
  const int64_t n = count_[layer];
  out->resize(static_cast<size_t>(n * row_));
  const int64_t first = (next_[layer] - n + capacity_) % std::max<int64_t>(capacity_, 1);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t slot = (first + i) % capacity_;
    std::copy_n(rows_[layer].data() + slot * row_, row_, out->data() + i * row_);
  }
}

}  // namespace kvserve
