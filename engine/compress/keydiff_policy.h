// KeyDiff's query-agnostic score, for a prompt whose question comes later (a shared document,
// a chat's first turn): per KV head, an entry is worth keeping the more its key points away
// from the head's typical key, score = -cos(k_j, a) with a the mean of the unit-normalized
// keys. Keys that look like every other key are what attention spreads thinly over; distinct
// ones carry what a later query can single out. (Public reference: kvpress KeyDiffPress.)
#pragma once
#include <vector>

#include "engine/compress/kv_policy.h"

namespace kvserve {

// It reads keys on the host, so it runs only over a pool in host memory (ReadsHostPages).
class KeyDiffPolicy : public ScoringPolicy {
 public:
  std::string_view Name() const override { return "keydiff"; }
  void Score(const SelectionRequest& r, Backend& backend, BackendScratch& scratch, float* scores) const override;
  bool ReadsHostPages() const override { return true; }
};

// scores [n_kv_heads, layer.len] on the host: KeyDiff's score of every slot of the layer.
void KeyDiffScores(const LayerKv& layer, std::vector<float>* scores);

}  // namespace kvserve
