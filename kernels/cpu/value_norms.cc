// CriticalKV on the CPU, reference form: the projected value norms as explicit dot products
// (double accumulation), and the two-stage merge of base score and norm.
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/kv_compress_ops.h"
#include "kernels/kv_rows.h"

namespace kvserve::cpu {

void ProjectedValueNorms(const PagedKv& kv, const int32_t* pages, int64_t first, int64_t len, const float* wo,
                         int64_t hidden, int64_t n_heads, float* norms, int64_t stride) {
  const int64_t kvh = kv.n_kv_heads, d = kv.head_dim, group = n_heads / kvh, qd = n_heads * d;
  std::vector<float> v(static_cast<size_t>(d));
  for (int64_t g = 0; g < kvh; ++g) {
    for (int64_t s = first; s < len; ++s) {
      ReadKvRow(kv, kv.v, KvOffset(kv, pages, s, g), v.data());
      double mean = 0;
      for (int64_t h = g * group; h < (g + 1) * group; ++h) {
        double l1 = 0;
        for (int64_t o = 0; o < hidden; ++o) {
          double acc = 0;
          for (int64_t e = 0; e < d; ++e) acc += static_cast<double>(v[e]) * wo[o * qd + h * d + e];
          l1 += std::fabs(acc);
        }
        mean += l1 / static_cast<double>(group);
      }
      norms[g * stride + s] = static_cast<float>(mean);
    }
  }
}

void CriticalKvScores(const float* base, const float* norms, int64_t norms_stride, int64_t heads, int64_t len,
                      int64_t n_first, float eps, float* merged) {
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t s = 0; s < len; ++s) merged[h * len + s] = (base[h * len + s] + eps) * norms[h * norms_stride + s];
  }
  if (n_first <= 0) return;
  // Stage 1 winners outrank every stage-2 score.
  std::vector<int32_t> first(static_cast<size_t>(heads * n_first));
  TopKPerHead(base, heads, len, n_first, first.data());
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < n_first; ++i) merged[h * len + first[h * n_first + i]] = std::numeric_limits<float>::max();
  }
}

}  // namespace kvserve::cpu
