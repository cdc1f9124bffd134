// Evicted entries' weight, merged into the kept ones: the reference in double loops (the
// oracle of the CUDA kernel) and the CPU backend's form, whose distances come from one BLAS
// matmul per head.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/kv_compress_ops.h"
#include "kernels/kv_rows.h"

namespace kvserve::cpu {
namespace {

constexpr float kNoWeight = -std::numeric_limits<float>::infinity();

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

}  // namespace

void MergeEvictedWeights(const PagedKv& kv, const int32_t* pages, int64_t len, const int32_t* slots, int64_t k,
                         float* out_log_w) {
  const int64_t d = kv.head_dim;
  std::vector<float> a(static_cast<size_t>(d)), b(static_cast<size_t>(d));
  for (int64_t h = 0; h < kv.n_kv_heads; ++h) {
    const int32_t* kept = slots + h * k;
    const HeadSlots hs = ReadHead(kv, pages, len, kept, k, h);
    std::vector<double> mass(static_cast<size_t>(k), 0.0);
    for (int64_t s = 0; s < len; ++s) {
      const float lw = kv.log_w[KvOffset(kv, pages, s, h)];
      if (!std::isfinite(lw)) continue;  // weight 0: nothing to carry
      int64_t to = hs.kept_index[s];
      if (to < 0) {
        ReadKvRow(kv, kv.k, KvOffset(kv, pages, s, h), a.data());
        double best = std::numeric_limits<double>::infinity();
        for (int64_t i = 0; i < k; ++i) {
          ReadKvRow(kv, kv.k, KvOffset(kv, pages, kept[i], h), b.data());
          double dist = 0;
          for (int64_t e = 0; e < d; ++e) dist += (static_cast<double>(a[e]) - b[e]) * (static_cast<double>(a[e]) - b[e]);
          if (dist < best) {
            best = dist;
            to = i;
          }
        }
      }
      mass[to] += std::exp(static_cast<double>(lw) - hs.max_log_w);
    }
    WriteLogSums(mass, hs.max_log_w, out_log_w + h * k);
  }
}

void MergeEvictedWeightsBlas(const PagedKv& kv, const int32_t* pages, int64_t len, const int32_t* slots, int64_t k,
                             float* out_log_w) {
  const int64_t d = kv.head_dim;
  std::vector<float> kept_keys(static_cast<size_t>(k * d)), kept_sq(static_cast<size_t>(k)), evicted_keys, dots;
  std::vector<int32_t> evicted;
  for (int64_t h = 0; h < kv.n_kv_heads; ++h) {
    const int32_t* kept = slots + h * k;
    const HeadSlots hs = ReadHead(kv, pages, len, kept, k, h);
    std::vector<double> mass(static_cast<size_t>(k), 0.0);
    for (int64_t i = 0; i < k; ++i) {
      float* row = &kept_keys[i * d];
      ReadKvRow(kv, kv.k, KvOffset(kv, pages, kept[i], h), row);
      float sq = 0;
      for (int64_t e = 0; e < d; ++e) sq += row[e] * row[e];
      kept_sq[i] = sq;
      const float lw = kv.log_w[KvOffset(kv, pages, kept[i], h)];
      if (std::isfinite(lw)) mass[i] += std::exp(static_cast<double>(lw) - hs.max_log_w);
    }
    evicted.clear();
    for (int64_t s = 0; s < len; ++s) {
      if (hs.kept_index[s] < 0 && std::isfinite(kv.log_w[KvOffset(kv, pages, s, h)])) {
        evicted.push_back(static_cast<int32_t>(s));
      }
    }
    const int64_t m = static_cast<int64_t>(evicted.size());
    if (m > 0) {
      evicted_keys.resize(static_cast<size_t>(m * d));
      dots.resize(static_cast<size_t>(m * k));
      for (int64_t j = 0; j < m; ++j) ReadKvRow(kv, kv.k, KvOffset(kv, pages, evicted[j], h), &evicted_keys[j * d]);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(k),
                  static_cast<int>(d), 1.0f, evicted_keys.data(), static_cast<int>(d), kept_keys.data(),
                  static_cast<int>(d), 0.0f, dots.data(), static_cast<int>(k));
      for (int64_t j = 0; j < m; ++j) {
        // ||a - b||^2 = ||b||^2 - 2 a.b + ||a||^2, and ||a||^2 is the same for every kept b.
        const float* row = &dots[j * k];
        int64_t to = 0;
        float best = std::numeric_limits<float>::infinity();
        for (int64_t i = 0; i < k; ++i) {
          const float dist = kept_sq[i] - 2 * row[i];
          if (dist < best) {
            best = dist;
            to = i;
          }
        }
        mass[to] += std::exp(static_cast<double>(kv.log_w[KvOffset(kv, pages, evicted[j], h)]) - hs.max_log_w);
      }
    }
    WriteLogSums(mass, hs.max_log_w, out_log_w + h * k);
  }
}

}  // namespace kvserve::cpu
