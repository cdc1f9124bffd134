// Evicted entries' weight, merged into the kept ones: the reference in double loops (the
// oracle of the CUDA kernel) and the CPU backend's form, whose distances come from one BLAS
// matmul per head.
#include <cblas.h>
#ifdef __AVX2__
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/kv_compress_ops.h"
#include "kernels/kv_rows.h"

namespace kvserve::cpu {
namespace {

constexpr float kNoWeight = -std::numeric_limits<float>::infinity();
// Distances per row block of MergeEvictedWeightsBlas: 1 MB of floats, inside a core's L2.
constexpr int64_t kBlockFloats = 1 << 18;

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

// The first i < k with the smallest sq[i] + dots[i] (dots hold -2 a.b, so this is the kept key
// nearest to a), as the scalar scan with a strict < finds it: each of eight lanes keeps its
// first minimum, and the lanes' smallest value with the lowest index wins. Vectorized because
// this scan of an evicted-by-kept matrix costs as much as the matmul that fills it.
int64_t NearestKept(const float* sq, const float* dots, int64_t k) {
  int64_t i = 0, to = 0;
  float best = std::numeric_limits<float>::infinity();
#ifdef __AVX2__
  if (k >= 16) {
    __m256 best_v = _mm256_set1_ps(best);
    __m256i best_i = _mm256_setzero_si256();
    __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i step = _mm256_set1_epi32(8);
    for (; i + 8 <= k; i += 8) {
      const __m256 v = _mm256_add_ps(_mm256_loadu_ps(sq + i), _mm256_loadu_ps(dots + i));
      const __m256 lt = _mm256_cmp_ps(v, best_v, _CMP_LT_OQ);
      best_v = _mm256_blendv_ps(best_v, v, lt);
      best_i = _mm256_castps_si256(
          _mm256_blendv_ps(_mm256_castsi256_ps(best_i), _mm256_castsi256_ps(idx), lt));
      idx = _mm256_add_epi32(idx, step);
    }
    alignas(32) float lane_v[8];
    alignas(32) int32_t lane_i[8];
    _mm256_store_ps(lane_v, best_v);
    _mm256_store_si256(reinterpret_cast<__m256i*>(lane_i), best_i);
    for (int l = 0; l < 8; ++l) {
      if (lane_v[l] < best || (lane_v[l] == best && lane_i[l] < to)) {
        best = lane_v[l];
        to = lane_i[l];
      }
    }
  }
#endif
  for (; i < k; ++i) {
    const float dist = sq[i] + dots[i];
    if (dist < best) {
      best = dist;
      to = i;
    }
  }
  return to;
}

void MergeEvictedWeights(const PagedKv& kv, const int32_t* pages, int64_t len, const int32_t* slots, int64_t k,
                         float radius, float* out_log_w) {
  const int64_t d = kv.head_dim;
  const double r2 = static_cast<double>(radius) * radius;
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
        if (best / std::max(a_sq, 1e-20) > r2) continue;  // no kept key like it: dropped
      }
      mass[to] += std::exp(static_cast<double>(lw) - hs.max_log_w);
    }
    WriteLogSums(mass, hs.max_log_w, out_log_w + h * k);
  }
}

void MergeEvictedWeightsBlas(const PagedKv& kv, const int32_t* pages, int64_t len, const int32_t* slots, int64_t k,
                             float radius, float* out_log_w) {
  const int64_t d = kv.head_dim;
  const float r2 = radius * radius;
  std::vector<float> kept_keys(static_cast<size_t>(k * d)), kept_sq(static_cast<size_t>(k)), evicted_keys, dots;
  std::vector<int32_t> evicted;
  std::vector<int64_t> nearest;
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
      for (int64_t j = 0; j < m; ++j) ReadKvRow(kv, kv.k, KvOffset(kv, pages, evicted[j], h), &evicted_keys[j * d]);
      nearest.resize(static_cast<size_t>(m));
      // Row blocks whose distances stay in cache between the matmul that writes them and the
      // scan that reads them (a whole head's, evicted x kept floats, would go out to DRAM).
      const int64_t block = std::max<int64_t>(16, kBlockFloats / k);
      dots.resize(static_cast<size_t>(std::min(m, block) * k));
      for (int64_t j0 = 0; j0 < m; j0 += block) {
        const int64_t rows = std::min(block, m - j0);
        // ||a - b||^2 = ||b||^2 - 2 a.b + ||a||^2, and ||a||^2 is the same for every kept b: the
        // matmul's alpha of -2 leaves ||b||^2 + dots to compare (scaling by 2 is exact).
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows), static_cast<int>(k),
                    static_cast<int>(d), -2.0f, &evicted_keys[j0 * d], static_cast<int>(d), kept_keys.data(),
                    static_cast<int>(d), 0.0f, dots.data(), static_cast<int>(k));
#pragma omp parallel for schedule(static) if (rows * k > (1 << 16))
        for (int64_t j = 0; j < rows; ++j) nearest[j0 + j] = NearestKept(kept_sq.data(), &dots[j * k], k);
      }
      for (int64_t j = 0; j < m; ++j) {
        if (r2 < std::numeric_limits<float>::infinity()) {
          // The distance to the one kept key chosen, from the keys themselves (d products).
          const float* a = &evicted_keys[j * d];
          const float* b = &kept_keys[nearest[j] * d];
          float a_sq = 0, dot = 0;
          for (int64_t e = 0; e < d; ++e) {
            a_sq += a[e] * a[e];
            dot += a[e] * b[e];
          }
          if ((a_sq + kept_sq[nearest[j]] - 2 * dot) / std::max(a_sq, 1e-20f) > r2) continue;  // dropped
        }
        mass[nearest[j]] += std::exp(static_cast<double>(kv.log_w[KvOffset(kv, pages, evicted[j], h)]) - hs.max_log_w);
      }
    }
    WriteLogSums(mass, hs.max_log_w, out_log_w + h * k);
  }
}

}  // namespace kvserve::cpu
