// SnapKV window scores, CPU reference: every logit, softmax and pool written out as loops in
// double, so the engine's scorer and the CUDA kernel both have an unambiguous oracle.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/kv_compress_ops.h"
#include "kernels/kv_rows.h"

namespace kvserve::cpu {

void SnapKvScores(const PagedKv& kv, const int32_t* pages, int64_t len, const float* window, int64_t w,
                  int64_t n_heads, float scale, int64_t pool_kernel, float* scores) {
  const int64_t kvh = kv.n_kv_heads, d = kv.head_dim, group = n_heads / kvh, m = len - w, pad = pool_kernel / 2;
  std::vector<double> attn(static_cast<size_t>(m)), logits(static_cast<size_t>(len));
  std::vector<float> key(static_cast<size_t>(d));
  float best = 0;
  for (int64_t g = 0; g < kvh; ++g) {
    float* out = scores + g * len;
    std::vector<double> sum_pooled(static_cast<size_t>(m), 0.0);
    for (int64_t hh = 0; hh < group; ++hh) {
      const int64_t h = g * group + hh;
      std::fill(attn.begin(), attn.end(), 0.0);
      for (int64_t i = 0; i < w; ++i) {
        const float* q = window + (i * n_heads + h) * d;
        const int64_t seen = m + i + 1;
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t s = 0; s < seen; ++s) {
          const int64_t off = KvOffset(kv, pages, s, g);
          ReadKvRow(kv, kv.k, off, key.data());
          double dot = 0;
          for (int64_t e = 0; e < d; ++e) dot += static_cast<double>(q[e]) * key[e];
          logits[s] = dot * scale + kv.log_w[off];
          mx = std::max(mx, logits[s]);
        }
        double denom = 0;
        for (int64_t s = 0; s < seen; ++s) denom += std::exp(logits[s] - mx);
        for (int64_t s = 0; s < m; ++s) attn[s] += std::exp(logits[s] - mx) / denom / static_cast<double>(w);
      }
      for (int64_t s = 0; s < m; ++s) {
        double pooled = 0;
        for (int64_t t = std::max<int64_t>(0, s - pad); t <= std::min(m - 1, s + pad); ++t) pooled += attn[t];
        sum_pooled[s] += pooled / static_cast<double>(pool_kernel);
      }
    }
    for (int64_t s = 0; s < m; ++s) {
      out[s] = static_cast<float>(sum_pooled[s] / static_cast<double>(group));
      best = std::max(best, out[s]);
    }
  }
  for (int64_t g = 0; g < kvh; ++g) std::fill(scores + g * len + m, scores + (g + 1) * len, best + 1.0f);
}

}  // namespace kvserve::cpu
