// SnapKV: each entry scored by how much attention the observation window (the last queries,
// post-RoPE) pays it, average-pooled over neighbouring slots, per KV head
// (Backend::SnapKvScores defines it). "pyramid" selects the same way under PyramidKV quotas.
#pragma once
#include <string>

#include "engine/compress/kv_policy.h"

namespace kvserve {

class SnapKvPolicy : public ScoringPolicy {
 public:
  SnapKvPolicy(std::string name, int64_t pool_kernel) : name_(std::move(name)), kernel_(pool_kernel) {}
  std::string_view Name() const override { return name_; }
  void Score(const SelectionRequest& r, Backend& backend, BackendScratch& scratch, float* scores) const override;
  bool ScoresWithQueries() const override { return true; }

 private:
  std::string name_;
  int64_t kernel_;
};

// The pool a selection keeping n_keep entries per head runs: pool_kernel, but at most the
// largest odd number <= n_keep / 4 (at least 1). A pool wide against what is kept smooths the
// scores into one span around the hottest entry: on a 40-token chat prompt at 50%, a pool of
// 31 dropped the chat template and SmolLM2 wrote 'HHHH...'. A 7-digit needle needs the wide
// pool only where the budget is large (31 kept at 4K and 8K tokens at 10%).
int64_t PoolKernelFor(int64_t pool_kernel, int64_t n_keep);

// scores [n_kv_heads, r.Candidates().len] (backend memory): SnapKV over the last
// min(window_len, layer.len) window queries, pooled by PoolKernelFor(pool_kernel, r.n_keep),
// a question probe's slots scored and dropped.
void SnapKvCandidateScores(const SelectionRequest& r, Backend& backend, BackendScratch& scratch, int64_t pool_kernel,
                           float* scores);

}  // namespace kvserve
