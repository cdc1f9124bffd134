#include "engine/compress/snapkv_scorer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/compress/selection_util.h"

namespace kvserve {

void WindowAttention(const SelectionRequest& r, Backend& backend, std::vector<float>* probs) {
  const LayerKv& L = r.layer;
  const int64_t len = L.len, d = L.kv.head_dim, kvh = L.kv.n_kv_heads;
  const int64_t group = r.n_heads / kvh;
  const int64_t w = std::min(r.window_len, len), m = len - w;
  const float* window = r.window.data() + (r.window_len - w) * r.n_heads * d;  // the last w rows
  probs->assign(static_cast<size_t>(r.n_heads * m), 0.0f);
  if (m == 0) return;

  std::vector<float> keys(static_cast<size_t>(len * d)), q(static_cast<size_t>(w * d)),
      logits(static_cast<size_t>(w * len)), log_w(static_cast<size_t>(len));
  for (int64_t g = 0; g < kvh; ++g) {
    GatherHead(L, g, /*values=*/false, keys.data());
    for (int64_t s = 0; s < len; ++s) log_w[s] = L.LogWeight(s, g);
    const WeightView kview{DType::kF32, len, d, keys.data()};
    for (int64_t hh = 0; hh < group; ++hh) {
      const int64_t h = g * group + hh;
      for (int64_t i = 0; i < w; ++i) std::copy_n(window + (i * r.n_heads + h) * d, d, q.data() + i * d);
      backend.MatMul(kview, q.data(), logits.data(), w);  // [w, len]
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
            row[s] = row[s] * r.scale + log_w[s];
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

void SnapKvScorer::Score(const SelectionRequest& r, Backend& backend, std::vector<float>* scores) const {
  const LayerKv& L = r.layer;
  const int64_t len = L.len, kvh = L.kv.n_kv_heads, group = r.n_heads / kvh;
  const int64_t w = std::min(r.window_len, len), m = len - w;
  std::vector<float> probs;
  WindowAttention(r, backend, &probs);

  scores->assign(static_cast<size_t>(kvh * len), 0.0f);
  const int64_t pad = kernel_ / 2;
  float best = 0;
  for (int64_t g = 0; g < kvh; ++g) {
    float* out = scores->data() + g * len;
    for (int64_t hh = 0; hh < group; ++hh) {
      const float* p = probs.data() + (g * group + hh) * m;
      for (int64_t s = 0; s < m; ++s) {
        // Average pool with zero padding; the divisor is always the kernel size.
        float sum = 0;
        for (int64_t t = std::max<int64_t>(0, s - pad); t <= std::min(m - 1, s + pad); ++t) sum += p[t];
        out[s] += sum / static_cast<float>(kernel_);
      }
    }
    for (int64_t s = 0; s < m; ++s) {
      out[s] /= static_cast<float>(group);
      best = std::max(best, out[s]);
    }
  }
  // As kvpress: one score above every other (the max over all heads, plus one).
  const float window_score = best + 1.0f;
  for (int64_t g = 0; g < kvh; ++g) {
    std::fill(scores->begin() + g * len + m, scores->begin() + (g + 1) * len, window_score);
  }
}

}  // namespace kvserve
