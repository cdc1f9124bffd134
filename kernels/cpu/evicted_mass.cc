// Evicted entries' weight (and, when asked, their values) merged into the kept ones: the
// reference in double loops (the oracle of the CUDA kernel) and the CPU backend's form, whose
// distances and nearest keys come from one tiled pass per head (nearest_keys.h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/kv_compress_ops.h"
#include "kernels/cpu/nearest_keys.h"
#include "kernels/kv_rows.h"

namespace kvserve::cpu {
namespace {

constexpr float kNoWeight = -std::numeric_limits<float>::infinity();
// Evicted keys per task of MergeEvictedWeightsTiled's threads.
constexpr int64_t kRowBlock = 256;

// Per head: kept index of each slot (-1 when evicted), and the largest finite log-weight
// (the shift that keeps the sums of exponentials in range).
struct HeadSlots {
  std::vector<int32_t> kept_index;
  float max_log_w = kNoWeight;
};

HeadSlots ReadHead(const PagedKv& kv, const int32_t* pages, int64_t len, const int32_t* kept, int64_t k, int64_t h) {
  HeadSlots hs;
  hs.kept_index.assign(static_cast<size_t>(len), -1);
  for (int64_t i = 0; i < k; ++i) hs.kept_index[kept[i]] = static_cast<int32_t>(i);
  for (int64_t s = 0; s < len; ++s) {
    const float lw = kv.log_w[KvOffset(kv, pages, s, h)];
    if (std::isfinite(lw)) hs.max_log_w = std::max(hs.max_log_w, lw);
  }
  return hs;
}

void WriteLogSums(const std::vector<double>& mass, float shift, float* out) {
  for (size_t i = 0; i < mass.size(); ++i) {
    out[i] = mass[i] > 0 ? static_cast<float>(std::log(mass[i]) + static_cast<double>(shift)) : kNoWeight;
  }
}

// The weighted sums of the values merged into each kept entry of one head, when the merge
// takes values too (empty otherwise): Add folds in the value of slot s with weight w, Write
// puts each kept entry's mean (sum / its weight) in its own slot's V.
class ValueSums {
 public:
  ValueSums(const PagedKv& kv, const int32_t* pages, int64_t k, int64_t h, bool active)
      : kv_(kv), pages_(pages), h_(h), d_(kv.head_dim), sums_(active ? static_cast<size_t>(k * d_) : 0, 0.0),
        row_(active ? static_cast<size_t>(d_) : 0) {}
  void Add(int64_t to, int64_t s, double w) {
    if (sums_.empty()) return;
    ReadKvRow(kv_, kv_.v, KvOffset(kv_, pages_, s, h_), row_.data());
    for (int64_t e = 0; e < d_; ++e) sums_[to * d_ + e] += w * row_[e];
  }
  void Write(const int32_t* kept, const std::vector<double>& mass) {
    if (sums_.empty()) return;
    for (size_t i = 0; i < mass.size(); ++i) {
      if (!(mass[i] > 0)) continue;  // no weight: the entry's value is never read
      for (int64_t e = 0; e < d_; ++e) row_[e] = static_cast<float>(sums_[i * d_ + e] / mass[i]);
      WriteKvRow(kv_, kv_.v, KvOffset(kv_, pages_, kept[i], h_), row_.data());
    }
  }

 private:
  const PagedKv& kv_;
  const int32_t* pages_;
  int64_t h_, d_;
  std::vector<double> sums_;
  std::vector<float> row_;
};

}  // namespace

void MergeEvictedWeights(const PagedKv& kv, const int32_t* pages, int64_t len, const int32_t* slots, int64_t k,
                         float radius, bool merge_values, float* out_log_w) {
  const int64_t d = kv.head_dim;
  const double r2 = static_cast<double>(radius) * radius;
  std::vector<float> a(static_cast<size_t>(d)), b(static_cast<size_t>(d));
  for (int64_t h = 0; h < kv.n_kv_heads; ++h) {
    const int32_t* kept = slots + h * k;
    const HeadSlots hs = ReadHead(kv, pages, len, kept, k, h);
    std::vector<double> mass(static_cast<size_t>(k), 0.0);
    ValueSums values(kv, pages, k, h, merge_values);
    for (int64_t s = 0; s < len; ++s) {
      const float lw = kv.log_w[KvOffset(kv, pages, s, h)];
      if (!std::isfinite(lw)) continue;  // weight 0: nothing to carry
      int64_t to = hs.kept_index[s];
      if (to < 0) {
        ReadKvRow(kv, kv.k, KvOffset(kv, pages, s, h), a.data());
        double best = std::numeric_limits<double>::infinity(), a_sq = 0;
        for (int64_t e = 0; e < d; ++e) a_sq += static_cast<double>(a[e]) * a[e];
        for (int64_t i = 0; i < k; ++i) {
          ReadKvRow(kv, kv.k, KvOffset(kv, pages, kept[i], h), b.data());
          double dist = 0;
          for (int64_t e = 0; e < d; ++e) dist += (static_cast<double>(a[e]) - b[e]) * (static_cast<double>(a[e]) - b[e]);
          if (dist < best) {
            best = dist;
            to = i;
          }
        }
        // No kept key at a finite distance (a NaN or infinite key), or none like it: dropped.
        if (to < 0 || best / std::max(a_sq, 1e-20) > r2) continue;
      }
      const double w = std::exp(static_cast<double>(lw) - hs.max_log_w);
      mass[to] += w;
      values.Add(to, s, w);
    }
    WriteLogSums(mass, hs.max_log_w, out_log_w + h * k);
    values.Write(kept, mass);
  }
}

void MergeEvictedWeightsTiled(const PagedKv& kv, const int32_t* pages, int64_t len, const int32_t* slots, int64_t k,
                              float radius, bool merge_values, float* out_log_w) {
  const int64_t d = kv.head_dim;
  const float r2 = radius * radius;
  std::vector<float> kept_keys(static_cast<size_t>(k * d)), evicted_keys;
  std::vector<float> panels(static_cast<size_t>(NearestPanelFloats(k, d)));
  std::vector<float> panel_sq(static_cast<size_t>(NearestPanelFloats(k, 1)));
  std::vector<int32_t> evicted;
  std::vector<int64_t> nearest;
  for (int64_t h = 0; h < kv.n_kv_heads; ++h) {
    const int32_t* kept = slots + h * k;
    const HeadSlots hs = ReadHead(kv, pages, len, kept, k, h);
    std::vector<double> mass(static_cast<size_t>(k), 0.0);
    ValueSums values(kv, pages, k, h, merge_values);
    for (int64_t i = 0; i < k; ++i) {
      ReadKvRow(kv, kv.k, KvOffset(kv, pages, kept[i], h), &kept_keys[i * d]);
      const float lw = kv.log_w[KvOffset(kv, pages, kept[i], h)];
      if (!std::isfinite(lw)) continue;
      const double w = std::exp(static_cast<double>(lw) - hs.max_log_w);
      mass[i] += w;
      values.Add(i, kept[i], w);
    }
    evicted.clear();
    for (int64_t s = 0; s < len; ++s) {
      if (hs.kept_index[s] < 0 && std::isfinite(kv.log_w[KvOffset(kv, pages, s, h)])) {
        evicted.push_back(static_cast<int32_t>(s));
      }
    }
    const int64_t m = static_cast<int64_t>(evicted.size());
    if (m > 0 && k > 0) {
      PackNearestPanels(kept_keys.data(), k, d, panels.data(), panel_sq.data());
      evicted_keys.resize(static_cast<size_t>(m * d));
      for (int64_t j = 0; j < m; ++j) ReadKvRow(kv, kv.k, KvOffset(kv, pages, evicted[j], h), &evicted_keys[j * d]);
      nearest.resize(static_cast<size_t>(m));
      // Row blocks over the threads, each passing over every kept key.
      const int64_t n_blocks = (m + kRowBlock - 1) / kRowBlock;
#pragma omp parallel for schedule(dynamic) if (m * k > (1 << 16))
      for (int64_t b = 0; b < n_blocks; ++b) {
        const int64_t j0 = b * kRowBlock;
        NearestKeys(&evicted_keys[j0 * d], std::min(kRowBlock, m - j0), d, panels.data(), panel_sq.data(), k,
                    &nearest[j0]);
      }
      for (int64_t j = 0; j < m; ++j) {
        // The distance to the one kept key chosen, from the keys themselves (d products;
        // ||b||^2 as packed with the panels). Not finite: the key or every kept key is NaN or
        // infinite, and NearestKeys's answer 0 is no nearest key, so the entry is dropped, as
        // in the reference; else dropped when farther than the radius.
        const float* a = &evicted_keys[j * d];
        const float* b = &kept_keys[nearest[j] * d];
        float a_sq = 0, dot = 0;
        for (int64_t e = 0; e < d; ++e) {
          a_sq += a[e] * a[e];
          dot += a[e] * b[e];
        }
        const float dist = a_sq + panel_sq[nearest[j]] - 2 * dot;
        if (!std::isfinite(dist) || dist / std::max(a_sq, 1e-20f) > r2) continue;
        const double w = std::exp(static_cast<double>(kv.log_w[KvOffset(kv, pages, evicted[j], h)]) - hs.max_log_w);
        mass[nearest[j]] += w;
        values.Add(nearest[j], evicted[j], w);
      }
    }
    WriteLogSums(mass, hs.max_log_w, out_log_w + h * k);
    values.Write(kept, mass);
  }
}

}  // namespace kvserve::cpu
