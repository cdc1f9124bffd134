// REDUCE by balanced clustering with protected directions: the bucket's keys are projected
// on their top-m weighted principal directions, split into k clusters of equal count along
// those directions, and each cluster keeps one member carrying the cluster's total weight,
// chosen so the weighted mean of the projected keys stays as close to exact as the members
// allow. docs/MERGE_REDUCE.md explains the choices.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/compress/reducer.h"

namespace kvserve {

// The clustering on plain arrays (what the reducer runs on one head's keys).
struct ClusterReduction {
  std::vector<double> basis;         // [d, m]: the protected directions, unit columns
  std::vector<double> mean;          // [d]: the weighted mean of the features
  std::vector<int32_t> cluster;      // [n]: cluster of each entry, in [0, k)
  std::vector<int32_t> representative;  // [k]: the entry each cluster keeps
  std::vector<double> cluster_weight;   // [k]: the weight it carries (the cluster's total)
};

// features [n, d], weights [n] (all > 0), 1 <= k <= n, 1 <= m. m >= d protects every
// direction (the basis is then the identity, no eigen-solve).
ClusterReduction BalancedClusterReduce(const float* features, const double* weights, int64_t n, int64_t d, int64_t m,
                                       int64_t k);

class ClusterReducer : public Reducer {
 public:
  explicit ClusterReducer(int64_t protected_dims) : protected_dims_(protected_dims) {}
  std::string_view Name() const override { return "cluster"; }
  std::vector<WeightedEntry> Reduce(const LayerKv& layer, int64_t head, absl::Span<const WeightedEntry> bucket,
                                    int64_t k, uint64_t seed) const override;

 private:
  int64_t protected_dims_;
};

}  // namespace kvserve
