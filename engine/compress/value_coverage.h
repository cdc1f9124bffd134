// How many entries it takes to stand for a prompt's values: a uniform sample of the values
// one KV head produced (reservoir sampling over the stream, so chunk mode sees the entries
// it later evicts), and the share of their variance left unexplained when k of them, drawn
// at random, stand for all (each entry replaced by its nearest representative). Repetitive
// text has few distinct values and the share falls to ~0 at small k; a table of unrelated
// keys keeps it high. This is the curve --kv-budget auto:RISK reads.
#pragma once
#include <cstdint>
#include <vector>

namespace kvserve {

// Entries kept per (layer, KV head): enough for the curve's shape, small per request.
inline constexpr int64_t kValueSampleSize = 256;

class ValueReservoir {
 public:
  ValueReservoir(int64_t n_heads, int64_t head_dim, int64_t capacity, uint64_t seed);

  // Offers one entry: values [n_heads, head_dim] of its KV heads (one decision for all heads).
  void Offer(const float* const* head_values);
  int64_t seen() const { return seen_; }
  int64_t size() const { return std::min(seen_, capacity_); }
  // [size(), head_dim] of head h, in sample order.
  const float* head(int64_t h) const { return values_.data() + h * capacity_ * head_dim_; }
  int64_t head_dim() const { return head_dim_; }

 private:
  int64_t n_heads_, head_dim_, capacity_, seen_ = 0;
  uint64_t state_;
  std::vector<float> values_;  // [n_heads, capacity, head_dim]
};

// unexplained[i] = mean over the sample of the squared distance to the nearest of the first
// 2^i sample entries (in a seeded random order), over the sample's total variance; the last
// entry is at the whole sample (0). Empty for fewer than 2 entries or zero variance.
std::vector<double> UnexplainedValueShare(const float* values, int64_t n, int64_t d, uint64_t seed);

// The curve read at k representatives out of `entries` (the sample stands for them: k maps
// to k * sample / entries of its entries), log-linear between the powers of two. 0 when
// k >= entries.
double UnexplainedAt(const std::vector<double>& curve, int64_t sample, int64_t entries, int64_t k);

}  // namespace kvserve
