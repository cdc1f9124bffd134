// Merge-reduce as a one-shot KvPolicy (mergereduce:random, mergereduce:cluster): a layer
// is reduced as if its entries had streamed in, with the bucket size that fits n_keep.
// SequenceCompressor does not use this: it keeps the bucket state across steps
// (MergeReduce); this serves callers that select a whole layer at once.
#pragma once
#include <memory>
#include <string>

#include "engine/compress/kv_policy.h"
#include "engine/compress/reducer.h"

namespace kvserve {

class MergeReducePolicy : public KvPolicy {
 public:
  MergeReducePolicy(std::string name, std::unique_ptr<Reducer> reducer, uint64_t seed, int64_t n_sink)
      : name_(std::move(name)), reducer_(std::move(reducer)), seed_(seed), n_sink_(n_sink) {}
  std::string_view Name() const override { return name_; }
  // Keeps at most n_keep entries per head (fewer when the bucket bound lands below it); the
  // recent window is min(window_len, n_keep / 2), the sinks min(n_sink, n_keep / 4).
  Selection Select(const SelectionRequest& r, Backend& backend) const override;
  // Reducers read keys and values on the host (and reweight entries), so merge-reduce needs a
  // pool in host memory; it is not a ScoringPolicy.
  bool ReadsHostPages() const override { return true; }

 private:
  std::string name_;
  std::unique_ptr<Reducer> reducer_;
  uint64_t seed_;
  int64_t n_sink_;
};

}  // namespace kvserve
