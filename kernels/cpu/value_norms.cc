// CriticalKV on the CPU: the projected value norms as explicit dot products (double
// accumulation, the reference) and in the CPU backend's float form (matmuls through the BLAS),
// and the two-stage merge of base score and norm.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/dequantize.h"
#include "kernels/cpu/kv_compress_ops.h"
#include "kernels/cpu/matmul.h"
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

namespace {

// Slots per projection call: bounds the [slots, hidden] scratch at long contexts.
constexpr int64_t kSlotsPerCall = 1024;

}  // namespace

void ProjectedValueNormsBlas(const PagedKv& kv, const int32_t* pages, int64_t first, int64_t len,
                             const WeightView& wo_view, int64_t n_heads, Determinism determinism, float* norms,
                             int64_t stride) {
  const int64_t n = len - first, d = kv.head_dim, kvh = kv.n_kv_heads, group = n_heads / kvh;
  const int64_t hidden = wo_view.rows, qd = wo_view.cols;
  if (n <= 0) return;

  // o_proj as f32 [hidden, qd], then head h's slice transposed to a [hidden, d] weight so
  // that MatMul(slice, v) = v W_O^h.
  std::vector<float> wo(static_cast<size_t>(hidden * qd));
  const int64_t row_bytes = RowBytes(wo_view.dtype, qd);
  for (int64_t o = 0; o < hidden; ++o) {
    DequantizeRow(wo_view.dtype, static_cast<const uint8_t*>(wo_view.data) + o * row_bytes, wo.data() + o * qd, qd);
  }
  std::vector<float> slice(static_cast<size_t>(hidden * d)), values(static_cast<size_t>(n * d)),
      proj(static_cast<size_t>(std::min(n, kSlotsPerCall) * hidden));
  for (int64_t g = 0; g < kvh; ++g) {
    for (int64_t s = first; s < len; ++s) ReadKvRow(kv, kv.v, KvOffset(kv, pages, s, g), values.data() + (s - first) * d);
    float* out = norms + g * stride + first;
    std::fill(out, out + n, 0.0f);
    for (int64_t hh = 0; hh < group; ++hh) {
      const int64_t h = g * group + hh;
      for (int64_t o = 0; o < hidden; ++o) std::copy_n(wo.data() + o * qd + h * d, d, slice.data() + o * d);
      const WeightView sview{DType::kF32, hidden, d, slice.data()};
      for (int64_t s0 = 0; s0 < n; s0 += kSlotsPerCall) {
        const int64_t rows = std::min(kSlotsPerCall, n - s0);
        float* proj_p = proj.data();
        MatMulShared(&sview, &proj_p, 1, values.data() + s0 * d, rows, determinism);
#pragma omp parallel for
        for (int64_t s = 0; s < rows; ++s) {
          float l1 = 0;
          for (int64_t o = 0; o < hidden; ++o) l1 += std::fabs(proj[s * hidden + o]);
          out[s0 + s] += l1 / static_cast<float>(group);
        }
      }
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
