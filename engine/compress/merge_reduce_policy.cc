#include "engine/compress/merge_reduce_policy.h"

#include <algorithm>

#include "engine/compress/merge_reduce.h"

namespace kvserve {

Selection MergeReducePolicy::Select(const SelectionRequest& r, Backend&) const {
  const int64_t window = std::min(r.window_len, r.n_keep / 2);
  const int64_t sinks = SinksWithin(n_sink_, r.n_keep);
  MergeReduceBuckets buckets(
      MergeReduceShapeForPrompt(r.n_keep, window, r.layer.len, sinks, r.layer.len, r.layer.len));
  uint64_t counter = 0;
  int64_t steps = 0;
  return PlanMergeReduce(*reducer_, buckets, r.layer, seed_, &counter, &steps);
}

}  // namespace kvserve
