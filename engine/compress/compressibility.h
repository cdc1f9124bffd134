// A per-request estimate of how compressible a prompt's KV cache is, made while the prompt
// is read. The proxy for an entry's response profile is what the window queries make of
// its key: r_j = scale * Q k_j over the last window queries of the layer (all query heads of
// the entry's KV head). Its covariance over the entries says how spread out the responses
// are: trace = how far apart (logit^2), effective rank and spectral tail = in how many
// directions. docs/MERGE_REDUCE.md maps the estimate to risk.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/compress/kv_policy.h"
#include "engine/kv/query_window.h"
#include "kernels/backend.h"

namespace kvserve {

// Eigen-directions counted as "head" of the spectrum; the rest is the tail.
inline constexpr int64_t kCompressibilityTopDirections = 8;

struct LayerCompressibility {
  double trace = 0;           // variance of one window query's logit across entries (logit^2)
  double effective_rank = 0;  // (sum lambda)^2 / sum lambda^2 of the response covariance
  double spectral_tail = 0;   // share of the variance outside the top 8 directions, in [0, 1]
};

struct CompressibilityEstimate {
  std::vector<LayerCompressibility> layers;
  LayerCompressibility mean;  // over layers

  // Estimated risk (logit^2) of summarizing each layer by k entries: the high-resolution
  // quantization law D(k) = trace * k^(-2 / effective_rank), averaged over layers.
  double RiskAt(int64_t k) const;
  bool empty() const { return layers.empty(); }
};

class CompressibilityEstimator {
 public:
  CompressibilityEstimator(int64_t n_layers, int64_t n_kv_heads, int64_t head_dim);

  // Adds the keys of layer l's slots [first, first + n) to the layer's moments.
  void AddEntries(const LayerKv& layer, int64_t l, int64_t first, int64_t n, Backend& backend);
  // The estimate from the moments so far and the window's queries [n_heads, head_dim] rows.
  CompressibilityEstimate Estimate(const QueryWindow& window, int64_t n_heads, float scale) const;

 private:
  int64_t n_kv_heads_, head_dim_;
  std::vector<int64_t> count_;          // per layer
  std::vector<std::vector<double>> sum_;  // per layer [n_kv_heads, d]
  std::vector<std::vector<double>> m2_;   // per layer [n_kv_heads, d, d]: sum of k k^T
};

// Eigenvalues (descending) of the covariance of r = scale * Q k over the entries, from the
// keys' covariance cov [d, d] and the queries q [rows, d]: those of C^1/2 (scale^2 Q^T Q) C^1/2.
std::vector<double> ResponseSpectrum(const std::vector<double>& cov, const float* q, int64_t rows, int64_t d,
                                     float scale);
// trace / effective rank / tail of a spectrum; rows_per_entry normalizes the trace to one query.
LayerCompressibility SummarizeSpectrum(const std::vector<double>& eig, int64_t rows_per_entry);

}  // namespace kvserve
