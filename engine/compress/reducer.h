// REDUCE, the step merge-reduce repeats: a bucket of one KV head's weighted entries becomes
// at most k weighted entries that stand for the whole bucket (weights sum to the bucket's).
#pragma once
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/types/span.h"
#include "engine/compress/kv_policy.h"

namespace kvserve {

// One entry of one KV head: a slot of the layer and the log-weight it carries.
struct WeightedEntry {
  int32_t slot = 0;
  float log_w = 0;
};

class Reducer {
 public:
  virtual ~Reducer() = default;
  virtual std::string_view Name() const = 0;
  // bucket: entries of KV head `head` of `layer`, ascending by slot (zero-weight entries,
  // log_w = -inf, may be among them and carry nothing). Returns distinct entries of the
  // bucket with weight > 0, ascending by slot, at most k of them. seed makes randomized
  // reducers reproducible.
  virtual std::vector<WeightedEntry> Reduce(const LayerKv& layer, int64_t head, absl::Span<const WeightedEntry> bucket,
                                            int64_t k, uint64_t seed) const = 0;
};

// "random" or "cluster" (protected_dims: principal directions the clustering protects,
// capped at head_dim). nullptr for any other name.
std::unique_ptr<Reducer> MakeReducer(std::string_view kind, int64_t protected_dims);

}  // namespace kvserve
