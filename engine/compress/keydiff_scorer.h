// KeyDiff's query-agnostic score, for a prompt whose question comes later (a shared document,
// a chat's first turn): per KV head, an entry is worth keeping the more its key points away
// from the head's typical key, score = -cos(k_j, a) with a the mean of the unit-normalized
// keys. Keys that look like every other key are what attention spreads thinly over; distinct
// ones carry what a later query can single out. (Public reference: kvpress KeyDiffPress.)
#pragma once
#include "engine/compress/kv_policy.h"

namespace kvserve {

class KeyDiffScorer : public KvScorer {
 public:
  void Score(const SelectionRequest& r, Backend& backend, std::vector<float>* scores) const override;
  bool UsesQueries() const override { return false; }
};

}  // namespace kvserve
