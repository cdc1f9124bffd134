// SnapKV's base score: how much attention the observation window (the last w queries,
// post-RoPE) pays each earlier entry. Softmax in float32 over the causal keys, mean over
// the window, an average pool of `kernel` slots (zero padded, divided by kernel), then the
// mean over the query heads of each KV head. The window's own entries score the highest
// other score plus one (as kvpress), so they are kept first.
#pragma once
#include "engine/compress/kv_policy.h"

namespace kvserve {

class SnapKvScorer : public KvScorer {
 public:
  explicit SnapKvScorer(int64_t pool_kernel) : kernel_(pool_kernel) {}
  void Score(const SelectionRequest& r, Backend& backend, std::vector<float>* scores) const override;

 private:
  int64_t kernel_;
};

// The window attention alone: probs [n_heads, len - w] = mean over the last w window
// queries of softmax(q k^T * scale + log_w) restricted to the slots before the window.
// w = min(window_len, len). Exposed for tests and other scorers.
void WindowAttention(const SelectionRequest& r, Backend& backend, std::vector<float>* probs);

}  // namespace kvserve
