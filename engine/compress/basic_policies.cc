#include "engine/compress/basic_policies.h"

#include <algorithm>

#include "engine/compress/selection_util.h"

namespace kvserve {
namespace {

// The same slot list for every head.
Selection SameSlotsForEveryHead(const LayerKv& L, const std::vector<int32_t>& slots) {
  Selection sel;
  sel.n_keep = static_cast<int64_t>(slots.size());
  for (int64_t h = 0; h < L.kv.n_kv_heads; ++h) {
    for (int32_t s : slots) {
      sel.slots.push_back(s);
      sel.log_w.push_back(L.LogWeight(s, h));
    }
  }
  return sel;
}

}  // namespace

Selection FullPolicy::Select(const SelectionRequest& r, Backend&) const {
  std::vector<int32_t> all(static_cast<size_t>(r.layer.len));
  for (int64_t s = 0; s < r.layer.len; ++s) all[s] = static_cast<int32_t>(s);
  return SameSlotsForEveryHead(r.layer, all);
}

Selection StreamingLlmPolicy::Select(const SelectionRequest& r, Backend&) const {
  const int64_t n = std::min(r.n_keep, r.layer.len);
  const int64_t sinks = std::min(n_sink_, n);
  std::vector<int32_t> slots;
  for (int64_t s = 0; s < sinks; ++s) slots.push_back(static_cast<int32_t>(s));
  for (int64_t s = r.layer.len - (n - sinks); s < r.layer.len; ++s) slots.push_back(static_cast<int32_t>(s));
  return SameSlotsForEveryHead(r.layer, slots);
}

Selection ScorerPolicy::Select(const SelectionRequest& r, Backend& backend) const {
  std::vector<float> scores;
  scorer_->Score(r, backend, &scores);
  if (r.probe_slots > 0) scores = DropTrailingSlots(scores, r.layer.kv.n_kv_heads, r.layer.len, r.probe_slots);
  return SelectTopPerHead(r.Candidates(), scores, r.n_keep);
}

}  // namespace kvserve
