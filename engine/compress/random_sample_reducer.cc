#include "engine/compress/random_sample_reducer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/model/split_mix64.h"

namespace kvserve {

uint64_t MixSeed(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
  uint64_t s = seed;
  for (uint64_t x : {a, b, c}) {
    s ^= x + 0x9e3779b97f4a7c15ULL + (s << 6) + (s >> 2);
    SplitMix64Next(s);
  }
  return SplitMix64Next(s);
}

double LogTotalWeight(absl::Span<const WeightedEntry> bucket) {
  double mx = -std::numeric_limits<double>::infinity();
  for (const WeightedEntry& e : bucket) mx = std::max(mx, static_cast<double>(e.log_w));
  if (!std::isfinite(mx)) return mx;
  double sum = 0;
  for (const WeightedEntry& e : bucket) sum += std::exp(static_cast<double>(e.log_w) - mx);
  return mx + std::log(sum);
}

std::vector<int64_t> WeightedDrawCounts(absl::Span<const WeightedEntry> bucket, int64_t k, uint64_t seed) {
  const double lse = LogTotalWeight(bucket);
  std::vector<int64_t> counts(bucket.size(), 0);
  if (!std::isfinite(lse)) return counts;
  std::vector<double> cdf(bucket.size());
  double acc = 0;
  for (size_t i = 0; i < bucket.size(); ++i) cdf[i] = (acc += std::exp(static_cast<double>(bucket[i].log_w) - lse));
  uint64_t state = seed;
  for (int64_t draw = 0; draw < k; ++draw) {
    const double u = static_cast<double>(SplitMix64Next(state) >> 11) * 0x1.0p-53 * acc;
    size_t i = static_cast<size_t>(std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
    // Rounding can put u at the very end; a zero-weight entry is never drawn.
    i = std::min(i, cdf.size() - 1);
    while (!std::isfinite(bucket[i].log_w) && i > 0) --i;
    ++counts[i];
  }
  return counts;
}

std::vector<WeightedEntry> RandomSampleReducer::Reduce(const LayerKv&, int64_t, absl::Span<const WeightedEntry> bucket,
                                                       int64_t k, uint64_t seed) const {
  const double lse = LogTotalWeight(bucket);
  const std::vector<int64_t> counts = WeightedDrawCounts(bucket, k, seed);
  std::vector<WeightedEntry> out;
  for (size_t i = 0; i < bucket.size(); ++i) {
    if (counts[i] == 0) continue;
    const double log_w = lse - std::log(static_cast<double>(k)) + std::log(static_cast<double>(counts[i]));
    out.push_back({bucket[i].slot, static_cast<float>(log_w)});
  }
  return out;
}

}  // namespace kvserve
