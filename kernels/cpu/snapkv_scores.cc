// SnapKV window scores: the CPU reference (every logit, softmax and pool written out as loops
// in double, the CUDA kernel's oracle) and the CPU backend's float form beside it.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/kv_compress_ops.h"
#include "kernels/cpu/matmul.h"
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

namespace {

// probs [n_heads, len - w] = mean over the w window queries of softmax(q k^T * scale + log_w)
// restricted to the slots before the window.
void WindowAttention(const PagedKv& kv, const int32_t* pages, int64_t len, const float* window, int64_t w,
                     int64_t n_heads, float scale, Determinism determinism, std::vector<float>* probs) {
  const int64_t d = kv.head_dim, kvh = kv.n_kv_heads, group = n_heads / kvh, m = len - w;
  probs->assign(static_cast<size_t>(n_heads * m), 0.0f);
  if (m == 0) return;

  std::vector<float> keys(static_cast<size_t>(len * d)), q(static_cast<size_t>(w * d)),
      logits(static_cast<size_t>(w * len)), log_w(static_cast<size_t>(len));
  for (int64_t g = 0; g < kvh; ++g) {
    for (int64_t s = 0; s < len; ++s) {
      const int64_t off = KvOffset(kv, pages, s, g);
      ReadKvRow(kv, kv.k, off, keys.data() + s * d);
      log_w[s] = kv.log_w[off];
    }
    const WeightView kview{DType::kF32, len, d, keys.data()};
    for (int64_t hh = 0; hh < group; ++hh) {
      const int64_t h = g * group + hh;
      for (int64_t i = 0; i < w; ++i) std::copy_n(window + (i * n_heads + h) * d, d, q.data() + i * d);
      float* logits_p = logits.data();
      MatMulShared(&kview, &logits_p, 1, q.data(), w, determinism);  // [w, len]
      float* out = probs->data() + h * m;
#pragma omp parallel
      {
        std::vector<float> acc(static_cast<size_t>(m), 0.0f);
#pragma omp for nowait
        for (int64_t i = 0; i < w; ++i) {
          // Window query i sits at slot m + i and sees slots [0, m + i].
          float* row = logits.data() + i * len;
          const int64_t seen = m + i + 1;
          float mx = -std::numeric_limits<float>::infinity();
          for (int64_t s = 0; s < seen; ++s) {
            row[s] = row[s] * scale + log_w[s];
            mx = std::max(mx, row[s]);
          }
          float sum = 0;
          for (int64_t s = 0; s < seen; ++s) sum += (row[s] = std::exp(row[s] - mx));
          const float inv = 1.0f / (sum * static_cast<float>(w));
          for (int64_t s = 0; s < m; ++s) acc[s] += row[s] * inv;
        }
#pragma omp critical
        for (int64_t s = 0; s < m; ++s) out[s] += acc[s];
      }
    }
  }
}

}  // namespace

void SnapKvScoresBlas(const PagedKv& kv, const int32_t* pages, int64_t len, const float* window, int64_t w,
                      int64_t n_heads, float scale, int64_t pool_kernel, Determinism determinism, float* scores) {
  const int64_t kvh = kv.n_kv_heads, group = n_heads / kvh, m = len - w;
  std::vector<float> probs;
  WindowAttention(kv, pages, len, window, w, n_heads, scale, determinism, &probs);

  std::fill(scores, scores + kvh * len, 0.0f);
  const int64_t pad = pool_kernel / 2;
  float best = 0;
  for (int64_t g = 0; g < kvh; ++g) {
    float* out = scores + g * len;
    for (int64_t hh = 0; hh < group; ++hh) {
      const float* p = probs.data() + (g * group + hh) * m;
      for (int64_t s = 0; s < m; ++s) {
        // Average pool with zero padding; the divisor is always the kernel size.
        float sum = 0;
        for (int64_t t = std::max<int64_t>(0, s - pad); t <= std::min(m - 1, s + pad); ++t) sum += p[t];
        out[s] += sum / static_cast<float>(pool_kernel);
      }
    }
    for (int64_t s = 0; s < m; ++s) {
      out[s] /= static_cast<float>(group);
      best = std::max(best, out[s]);
    }
  }
  // As kvpress: one score above every other (the max over all heads, plus one).
  for (int64_t g = 0; g < kvh; ++g) std::fill(scores + g * len + m, scores + (g + 1) * len, best + 1.0f);
}

}  // namespace kvserve::cpu
