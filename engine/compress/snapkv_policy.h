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

// scores [n_kv_heads, r.Candidates().len] (backend memory): SnapKV over the last
// min(window_len, layer.len) window queries, a question probe's slots scored and dropped.
void SnapKvCandidateScores(const SelectionRequest& r, Backend& backend, BackendScratch& scratch, int64_t pool_kernel,
                           float* scores);

}  // namespace kvserve
