// The most recent post-RoPE queries of one sequence, per layer: what SnapKV-style scorers
// observe. Kept as a ring of `capacity` rows [n_heads, head_dim] per layer, so the
// window survives across prefill chunks and decode steps.
#pragma once
#include <cstdint>
#include <vector>

namespace kvserve {

class QueryWindow {
 public:
  QueryWindow(int64_t n_layers, int64_t capacity, int64_t n_heads, int64_t head_dim);

  // Appends q[n, n_heads * head_dim] of this step; only the last `capacity` rows survive.
  void Append(int64_t layer, const float* q, int64_t n);
  // Rows held for the layer, at most capacity.
  int64_t size(int64_t layer) const { return count_[layer]; }
  // Copies the rows, oldest first, into out [size(layer), n_heads * head_dim].
  void CopyOrdered(int64_t layer, std::vector<float>* out) const;

  int64_t capacity() const { return capacity_; }
  int64_t row_floats() const { return row_; }

 private:
  int64_t capacity_, row_;
  std::vector<std::vector<float>> rows_;  // per layer [capacity, row_]
  std::vector<int64_t> next_;             // per layer: the ring slot written next
  std::vector<int64_t> count_;
};

}  // namespace kvserve
