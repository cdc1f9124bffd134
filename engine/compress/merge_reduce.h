// Merge-reduce: bounded-memory compression while a sequence is read. Per layer, the cache
// is, in slot order, [sinks | reduced buckets of k entries | raw entries | the recent
// window]. The sinks (the first tokens, which draw a large share of every query's attention
// whatever their content) and the window are never reduced. When
// 2k raw entries sit outside the window, REDUCE turns them into a bucket of k weighted
// entries; two adjacent buckets of one level merge (2k entries) and reduce into one bucket
// of the next level, like carrying in a binary counter, so a layer holds O(k log n) entries
// (O(k) once levels stop at max_level). Buckets have the same sizes for every KV head of a
// layer, so each head keeps the same count and compaction stays one Selection per layer.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/compress/reducer.h"
#include "engine/kv/page_pool.h"

namespace kvserve {

struct MergeReduceShape {
  int64_t k = 1;          // entries a reduced bucket keeps (a REDUCE takes 2k)
  int64_t window = 64;    // the most recent entries, never reduced
  int64_t max_level = 7;  // two buckets of this level merge into one of the same level
  int64_t sinks = 0;      // the first entries, never reduced
};

// Levels in the cache stop here: at most max_level + 1 reduced buckets per layer, whatever
// the stream's length (7: past 2^7 level-0 reductions, the oldest bucket keeps re-reducing).
inline constexpr int64_t kMergeReduceMaxLevel = 7;

// One layer's bucket structure (the same for every KV head of the layer).
class MergeReduceBuckets {
 public:
  explicit MergeReduceBuckets(MergeReduceShape shape) : shape_(shape) {}

  // Whether a layer of len entries has a REDUCE due.
  bool Due(int64_t len) const { return len - raw_begin() - shape_.window >= 2 * shape_.k; }
  // Runs, in order, every REDUCE due for a layer of len entries: reduce(begin) must turn the
  // 2k entries [begin, begin + 2k) into k. Returns the layer's new length.
  int64_t Advance(int64_t len, const std::function<void(int64_t begin)>& reduce);

  // Levels of the reduced buckets, oldest (highest level) first; strictly decreasing.
  const std::vector<int32_t>& levels() const { return levels_; }
  int64_t reduced_len() const { return shape_.k * static_cast<int64_t>(levels_.size()); }
  // The first slot after the sinks and the reduced buckets.
  int64_t raw_begin() const { return shape_.sinks + reduced_len(); }
  const MergeReduceShape& shape() const { return shape_; }

  // The most entries a layer holds after Advance at any point of a stream of n entries.
  static int64_t SteadyBound(const MergeReduceShape& shape, int64_t n);

 private:
  MergeReduceShape shape_;
  std::vector<int32_t> levels_;
};

// The shape whose steady bound over a stream of n entries fits `budget` entries, with the
// largest k that does (k >= 1 even when the window alone passes the budget). n <= budget
// gives a k so large that nothing is ever reduced.
MergeReduceShape MergeReduceShapeForBudget(int64_t budget, int64_t window, int64_t n, int64_t sinks = 0,
                                           int64_t max_level = kMergeReduceMaxLevel);

// Entries a layer of shape s holds right after a prompt of prompt_len entries that arrived in
// steps of `step` (the last one shorter), every REDUCE due run after each step.
int64_t EntriesAfterPrompt(const MergeReduceShape& s, int64_t prompt_len, int64_t step);

// Among the shapes whose steady bound over n entries fits `budget` (bucket sizes from half
// of MergeReduceShapeForBudget's k up to it), the one that holds the most entries right after
// the prompt (ties: the larger k). The binary counter's popcount makes that count jump with
// k: at 2,048 tokens and a budget of 614 the largest k = 100 ends the prompt with 248
// entries, k = 85 with 433. Memory stays bounded whatever the steps really are; only
// quality depends on `step` being the real one.
MergeReduceShape MergeReduceShapeForPrompt(int64_t budget, int64_t window, int64_t n, int64_t sinks,
                                           int64_t prompt_len, int64_t step);

// Runs every REDUCE that `buckets` has due for `layer` and returns the Selection that
// applies them (entries outside the reduced buckets keep their log-weights; heads that kept
// fewer than k in a bucket are padded with zero-weight entries so each head keeps the same
// count). *counter numbers the REDUCE steps of the layer for the seeds; *steps counts them.
Selection PlanMergeReduce(const Reducer& reducer, MergeReduceBuckets& buckets, const LayerKv& layer, uint64_t seed,
                          uint64_t* counter, int64_t* steps);

// Merge-reduce over one sequence's layers: the bucket state, the reducer, the seeds.
class MergeReduce {
 public:
  MergeReduce(std::unique_ptr<Reducer> reducer, std::vector<MergeReduceShape> shapes, uint64_t seed);

  // Runs every REDUCE due in layer l, then compacts the layer once (the reduced entries keep
  // their K/V, carry their new log-weights, and pad heads that kept fewer than k with
  // zero-weight entries). Returns the number of REDUCE steps run.
  absl::StatusOr<int64_t> ReduceLayer(Backend& backend, PagePool& pool, SequenceKv& seq, int64_t l);

  const MergeReduceBuckets& buckets(int64_t l) const { return buckets_[l]; }
  const MergeReduceShape& shape(int64_t l) const { return buckets_[l].shape(); }

 private:
  std::unique_ptr<Reducer> reducer_;
  std::vector<MergeReduceBuckets> buckets_;
  std::vector<uint64_t> reductions_;  // per layer: REDUCE steps so far (part of each seed)
  uint64_t seed_;
};

}  // namespace kvserve
