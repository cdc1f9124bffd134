#include "engine/compress/value_coverage.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "engine/compress/random_sample_reducer.h"

namespace kvserve {
namespace {

uint64_t Next(uint64_t& state) { return state = MixSeed(state, 1); }

}  // namespace

ValueReservoir::ValueReservoir(int64_t n_heads, int64_t head_dim, int64_t capacity, uint64_t seed)
    : n_heads_(n_heads), head_dim_(head_dim), capacity_(capacity), state_(seed),
      values_(static_cast<size_t>(n_heads * capacity * head_dim), 0.0f) {}

void ValueReservoir::Offer(const float* const* head_values) {
  // Algorithm R: entry t (0-based) takes a slot with probability capacity / (t + 1).
  int64_t slot = seen_;
  if (seen_ >= capacity_) slot = static_cast<int64_t>(Next(state_) % static_cast<uint64_t>(seen_ + 1));
  ++seen_;
  if (slot >= capacity_) return;
  for (int64_t h = 0; h < n_heads_; ++h) {
    std::copy_n(head_values[h], head_dim_, values_.data() + (h * capacity_ + slot) * head_dim_);
  }
}

std::vector<double> UnexplainedValueShare(const float* v, int64_t n, int64_t d, uint64_t seed) {
  if (n < 2) return {};
  std::vector<double> mean(static_cast<size_t>(d), 0.0);
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t a = 0; a < d; ++a) mean[a] += v[j * d + a] / static_cast<double>(n);
  }
  double total = 0;
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t a = 0; a < d; ++a) total += (v[j * d + a] - mean[a]) * (v[j * d + a] - mean[a]);
  }
  total /= static_cast<double>(n);
  if (!(total > 0)) return {};
  // A seeded order (Fisher-Yates): representatives are its prefixes, so each doubling only
  // adds distances to the new ones.
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  uint64_t state = seed;
  for (int64_t i = n - 1; i > 0; --i) std::swap(order[i], order[Next(state) % static_cast<uint64_t>(i + 1)]);
  std::vector<double> nearest(static_cast<size_t>(n), std::numeric_limits<double>::infinity()), curve;
  int64_t reps = 0;
  for (int64_t k = 1;; k = std::min(2 * k, n)) {
    for (; reps < k; ++reps) {
      const float* p = v + order[reps] * d;
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t a = 0; a < d; ++a) s += (v[j * d + a] - p[a]) * (v[j * d + a] - p[a]);
        nearest[j] = std::min(nearest[j], s);
      }
    }
    const double d2 = std::accumulate(nearest.begin(), nearest.end(), 0.0) / static_cast<double>(n);
    curve.push_back(d2 / total);
    if (k == n) break;
  }
  return curve;
}

double UnexplainedAt(const std::vector<double>& curve, int64_t sample, int64_t entries, int64_t k) {
  if (curve.empty() || k >= entries) return 0;
  // Curve point i is at min(2^i, sample) representatives of the sample.
  const double x = std::max(1.0, static_cast<double>(k) * static_cast<double>(sample) / static_cast<double>(entries));
  const double pos = std::log2(x);
  const size_t i = static_cast<size_t>(std::floor(pos));
  if (i + 1 >= curve.size()) return curve.back();
  const double lo = std::ldexp(1.0, static_cast<int>(i));
  const double hi = std::min(2 * lo, static_cast<double>(sample));
  const double t = hi > lo ? std::clamp((x - lo) / (hi - lo), 0.0, 1.0) : 1.0;
  return curve[i] + t * (curve[i + 1] - curve[i]);
}

}  // namespace kvserve
