#include "engine/compress/criticalkv_policy.h"

#include <cmath>

#include "engine/compress/snapkv_policy.h"

namespace kvserve {

void CriticalKvPolicy::Score(const SelectionRequest& r, Backend& backend, BackendScratch& scratch,
                             float* scores) const {
  if (r.mid_prompt) {
    // Before the prompt's end (chunk mode) rank by attention alone: the output-aware stage,
    // applied at every mid-prompt compression, kept large-value filler over what the question
    // needs (8K passkey, docs/QUALITY.md); it still decides the prompt's last selection.
    SnapKvCandidateScores(r, backend, scratch, kernel_, scores);
    return;
  }
  const int64_t heads = r.layer.kv.n_kv_heads, len = r.layer.len - r.probe_slots;
  float* base = scratch.Take<float>(heads * len);
  SnapKvCandidateScores(r, backend, scratch, kernel_, base);
  const int64_t n_first = static_cast<int64_t>(std::floor(static_cast<double>(r.n_keep) * first_stage_ratio_));
  backend.CriticalKvScores(base, r.value_norms, r.norms_stride, heads, len, n_first, eps_, scores);
}

}  // namespace kvserve
