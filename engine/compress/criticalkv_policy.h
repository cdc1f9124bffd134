// CriticalKV: attention alone misses entries whose values move the output a lot. Per KV
// head with budget n: stage 1 keeps the top floor(n * first_stage_ratio) entries by the
// base score s; stage 2 fills the rest by (s_j + eps) * N_j, where N_j is the mean over the
// head's query heads h of ||v_j W_O^h||_1 and W_O^h is head h's [head_dim, hidden] slice of
// o_proj. (Public reference: kvpress CriticalKVPress.)
#pragma once
#include <memory>

#include "engine/compress/kv_policy.h"

namespace kvserve {

class CriticalKvPolicy : public KvPolicy {
 public:
  CriticalKvPolicy(std::unique_ptr<KvScorer> base, double first_stage_ratio, float eps = 1e-4f)
      : base_(std::move(base)), first_stage_ratio_(first_stage_ratio), eps_(eps) {}
  std::string_view Name() const override { return "criticalkv"; }
  Selection Select(const SelectionRequest& r, Backend& backend) const override;
  bool UsesValueNorms() const override { return true; }
  bool ScoresWithQueries() const override { return true; }

 private:
  std::unique_ptr<KvScorer> base_;
  double first_stage_ratio_;
  float eps_;
};

// N [n_kv_heads, layer.len - first]: for slots [first, layer.len), the mean over the KV
// head's query heads of the L1 norm of its value projected through that head's slice of o_proj.
void ProjectedValueNorms(const SelectionRequest& r, Backend& backend, std::vector<float>* norms,
                         int64_t first = 0);

}  // namespace kvserve
