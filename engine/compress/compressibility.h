// A per-request estimate of how compressible a prompt's KV cache is, made while the prompt
// is read. The proxy for an entry's response profile is what queries make of its key:
// r_j = scale * Q k_j, Q being the window's queries at the end of every prefill step (all
// query heads of the entry's KV head), so Q samples the whole prompt rather than only its
// end, whose consecutive queries are alike. Its covariance over the entries says how spread
// out the responses are: trace = how far apart (logit^2), effective rank and spectral tail =
// in how many directions. Post-RoPE keys of repeated text differ by position, so the key
// side alone says little about how many *distinct* entries a prompt has; the risk reads the
// values' side (value_coverage.h), which does. docs/MERGE_REDUCE.md has the figures.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/compress/kv_policy.h"
#include "engine/compress/value_coverage.h"
#include "engine/kv/query_window.h"
#include "kernels/backend.h"

namespace kvserve {

// Eigen-directions counted as "head" of the spectrum; the rest is the tail.
inline constexpr int64_t kCompressibilityTopDirections = 8;

struct LayerCompressibility {
  double trace = 0;           // variance of one window query's logit across entries (logit^2)
  double effective_rank = 0;  // (sum lambda)^2 / sum lambda^2 of the response covariance
  double spectral_tail = 0;   // share of the variance outside the top 8 directions, in [0, 1]
  // The values' side (value_coverage.h), mean over KV heads: unexplained[i] is the share of
  // the value variance left when 2^i sampled entries stand for the sample.
  std::vector<double> value_unexplained;
  int64_t sample = 0;   // entries in the sample
  int64_t entries = 0;  // entries the sample stands for

  // The share of the layer's value variance left unexplained when k of its entries stand
  // for all of them (0 when k covers every entry).
  double RiskAt(int64_t k) const { return UnexplainedAt(value_unexplained, sample, entries, k); }
};

struct CompressibilityEstimate {
  std::vector<LayerCompressibility> layers;
  LayerCompressibility mean;  // over layers

  // Estimated risk of summarizing each layer by k entries: the share of the value variance
  // k representatives leave unexplained (LayerCompressibility::RiskAt), averaged over
  // layers, in [0, 1] (about 2 only when k is a tiny share of the sample).
  double RiskAt(int64_t k) const;
  bool empty() const { return layers.empty(); }
};

class CompressibilityEstimator {
 public:
  CompressibilityEstimator(int64_t n_layers, int64_t n_kv_heads, int64_t head_dim, uint64_t seed = 0);

  // Adds the keys of layer l's slots [first, first + n) to the layer's moments, and offers
  // their values to the layer's sample.
  void AddEntries(const LayerKv& layer, int64_t l, int64_t first, int64_t n, Backend& backend);
  // Adds the newest n rows of layer l's window (n_heads query heads each) to the layer's
  // query moments.
  void AddQueries(const QueryWindow& window, int64_t l, int64_t n, int64_t n_heads, Backend& backend);
  // The estimate from the moments so far (scale: the attention scale, 1/sqrt(head_dim)). A
  // layer given fewer than 2 entries or no queries reports zeros for the key side.
  CompressibilityEstimate Estimate(float scale) const;

 private:
  int64_t n_kv_heads_, head_dim_;
  std::vector<int64_t> count_;          // per layer
  std::vector<std::vector<double>> sum_;  // per layer [n_kv_heads, d]
  std::vector<std::vector<double>> m2_;   // per layer [n_kv_heads, d, d]: sum of k k^T
  uint64_t seed_;
  std::vector<ValueReservoir> values_;    // per layer
  std::vector<int64_t> q_rows_;           // per layer: query rows per KV head (group * rows)
  std::vector<std::vector<double>> q_gram_;  // per layer [n_kv_heads, d, d]: sum of q q^T
};

// Eigenvalues (descending) of the covariance of r = scale * Q k over the entries, from the
// keys' covariance cov [d, d] and the queries' Gram matrix gram = Q^T Q [d, d]: those of
// C^1/2 (scale^2 Q^T Q) C^1/2.
std::vector<double> ResponseSpectrumFromGram(const std::vector<double>& cov, const std::vector<double>& gram,
                                             int64_t d, float scale);
// The same from the queries q [rows, d].
std::vector<double> ResponseSpectrum(const std::vector<double>& cov, const float* q, int64_t rows, int64_t d,
                                     float scale);
// trace / effective rank / tail of a spectrum; rows_per_entry normalizes the trace to one query.
LayerCompressibility SummarizeSpectrum(const std::vector<double>& eig, int64_t rows_per_entry);

}  // namespace kvserve
