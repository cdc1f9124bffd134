#include "engine/compress/snapkv_policy.h"

#include <algorithm>

namespace kvserve {

int64_t PoolKernelFor(int64_t pool_kernel, int64_t n_keep) {
  const int64_t quarter = n_keep / 4;
  const int64_t cap = std::max<int64_t>(1, quarter % 2 == 1 ? quarter : quarter - 1);
  return std::min(pool_kernel, cap);
}

void SnapKvCandidateScores(const SelectionRequest& r, Backend& backend, BackendScratch& scratch, int64_t pool_kernel,
                           float* scores) {
  const LayerKv& L = r.layer;
  // The window scores every slot, a question probe's too; only the candidates may be kept.
  const int64_t scored = L.len, heads = L.kv.n_kv_heads;
  const int64_t w = std::min(r.window_len, scored), row = r.n_heads * L.kv.head_dim;
  auto* window = scratch.Take<float>(w * row);
  backend.CopyIn(window, r.window.data() + (r.window_len - w) * row, static_cast<int64_t>(sizeof(float)) * w * row);
  float* all = r.probe_slots > 0 ? scratch.Take<float>(heads * scored) : scores;
  backend.SnapKvScores(L.kv, L.pages.data(), scored, window, w, AttentionShape{r.n_heads, r.scale},
                       PoolKernelFor(pool_kernel, r.n_keep), all);
  if (r.probe_slots > 0) KeepCandidateColumns(r, backend, scratch, all, scores);
}

void SnapKvPolicy::Score(const SelectionRequest& r, Backend& backend, BackendScratch& scratch, float* scores) const {
  SnapKvCandidateScores(r, backend, scratch, kernel_, scores);
}

}  // namespace kvserve
