// REDUCE by weighted random sampling: k draws with replacement, probability proportional to
// weight, each draw carrying total/k. The query-agnostic minimax choice: for every query,
// the expected attention numerator and denominator equal the bucket's.
#pragma once
#include "engine/compress/reducer.h"

namespace kvserve {

class RandomSampleReducer : public Reducer {
 public:
  std::string_view Name() const override { return "random"; }
  // An entry drawn c times comes back once with weight c * total / k, which is exactly the
  // attention of c copies; so fewer than k entries may come back.
  std::vector<WeightedEntry> Reduce(const LayerKv& layer, int64_t head, absl::Span<const WeightedEntry> bucket,
                                    int64_t k, uint64_t seed) const override;
};

// Draw counts [bucket.size()] of k weighted draws with replacement (the reference of the
// sampler above; deterministic per seed on every platform: SplitMix64, 53-bit uniforms).
std::vector<int64_t> WeightedDrawCounts(absl::Span<const WeightedEntry> bucket, int64_t k, uint64_t seed);

// log(sum exp(log_w)) over the bucket; -inf when every weight is 0.
double LogTotalWeight(absl::Span<const WeightedEntry> bucket);

// A 64-bit mix of a seed and up to three indices (SplitMix64 finalizer), for per-reduction seeds.
uint64_t MixSeed(uint64_t seed, uint64_t a, uint64_t b = 0, uint64_t c = 0);

}  // namespace kvserve
