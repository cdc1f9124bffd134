// CriticalKV: attention alone misses entries whose values move the output a lot. Per KV
// head with budget n: stage 1 keeps the top floor(n * first_stage_ratio) entries by the
// SnapKV score s; stage 2 fills the rest by (s_j + eps) * N_j, where N_j is the mean over the
// head's query heads h of ||v_j W_O^h||_1 and W_O^h is head h's [head_dim, hidden] slice of
// o_proj (Backend::ProjectedValueNorms, Backend::CriticalKvScores). (Public reference:
// kvpress CriticalKVPress.) A chunk-mode compression before the prompt's end
// (SelectionRequest::mid_prompt) ranks by s alone.
#pragma once
#include "engine/compress/kv_policy.h"

namespace kvserve {

class CriticalKvPolicy : public ScoringPolicy {
 public:
  CriticalKvPolicy(int64_t pool_kernel, double first_stage_ratio, float eps = 1e-4f)
      : kernel_(pool_kernel), first_stage_ratio_(first_stage_ratio), eps_(eps) {}
  std::string_view Name() const override { return "criticalkv"; }
  void Score(const SelectionRequest& r, Backend& backend, BackendScratch& scratch, float* scores) const override;
  bool UsesValueNorms() const override { return true; }
  bool ScoresWithQueries() const override { return true; }

 private:
  int64_t kernel_;
  double first_stage_ratio_;
  float eps_;
};

}  // namespace kvserve
