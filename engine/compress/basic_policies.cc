#include "engine/compress/basic_policies.h"

#include <algorithm>
#include <vector>

namespace kvserve {
namespace {

// scores [heads, len] (backend memory) = per_slot [len] for every head.
void SameScoresForEveryHead(const std::vector<float>& per_slot, int64_t heads, Backend& backend, float* scores) {
  const int64_t bytes = static_cast<int64_t>(sizeof(float) * per_slot.size());
  for (int64_t h = 0; h < heads; ++h) backend.CopyIn(scores + h * static_cast<int64_t>(per_slot.size()), per_slot.data(), bytes);
}

}  // namespace

void FullPolicy::Score(const SelectionRequest& r, Backend& backend, BackendScratch&, float* scores) const {
  const LayerKv L = r.Candidates();
  SameScoresForEveryHead(std::vector<float>(static_cast<size_t>(L.len), 0.0f), L.kv.n_kv_heads, backend, scores);
}

void StreamingLlmPolicy::Score(const SelectionRequest& r, Backend& backend, BackendScratch&, float* scores) const {
  const LayerKv L = r.Candidates();
  const int64_t n = std::min(r.n_keep, L.len), sinks = std::min(n_sink_, n);
  // Sinks above recent entries above the rest: the top n are exactly sinks + the last n - sinks.
  std::vector<float> per_slot(static_cast<size_t>(L.len), 0.0f);
  for (int64_t s = L.len - (n - sinks); s < L.len; ++s) per_slot[s] = 1.0f;
  for (int64_t s = 0; s < sinks; ++s) per_slot[s] = 2.0f;
  SameScoresForEveryHead(per_slot, L.kv.n_kv_heads, backend, scores);
}

}  // namespace kvserve
