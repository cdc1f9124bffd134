#include "engine/compress/criticalkv_policy.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/compress/selection_util.h"
#include "kernels/cpu/dequantize.h"

namespace kvserve {
namespace {

// Slots per projection call: bounds the [slots, hidden] scratch at long contexts.
constexpr int64_t kSlotsPerCall = 1024;

}  // namespace

void ProjectedValueNorms(const SelectionRequest& r, Backend& backend, std::vector<float>* norms, int64_t first) {
  const LayerKv& L = r.layer;
  const int64_t len = L.len - first, d = L.kv.head_dim, kvh = L.kv.n_kv_heads, group = r.n_heads / kvh;
  const int64_t hidden = r.wo.rows, qd = r.wo.cols;

  // o_proj as f32 [hidden, qd], then head h's slice transposed to a [hidden, d] weight so
  // that MatMul(slice, v) = v W_O^h.
  std::vector<float> wo(static_cast<size_t>(hidden * qd));
  const int64_t row_bytes = RowBytes(r.wo.dtype, qd);
  for (int64_t o = 0; o < hidden; ++o) {
    DequantizeRow(r.wo.dtype, static_cast<const uint8_t*>(r.wo.data) + o * row_bytes, wo.data() + o * qd, qd);
  }
  std::vector<float> slice(static_cast<size_t>(hidden * d)), values(static_cast<size_t>(len * d)),
      proj(static_cast<size_t>(std::min(len, kSlotsPerCall) * hidden));
  norms->assign(static_cast<size_t>(kvh * len), 0.0f);
  for (int64_t g = 0; g < kvh; ++g) {
    GatherHead(L, g, /*values=*/true, values.data(), first);
    float* out = norms->data() + g * len;
    for (int64_t hh = 0; hh < group; ++hh) {
      const int64_t h = g * group + hh;
      for (int64_t o = 0; o < hidden; ++o) std::copy_n(wo.data() + o * qd + h * d, d, slice.data() + o * d);
      const WeightView sview{DType::kF32, hidden, d, slice.data()};
      for (int64_t s0 = 0; s0 < len; s0 += kSlotsPerCall) {
        const int64_t n = std::min(kSlotsPerCall, len - s0);
        backend.MatMul(sview, values.data() + s0 * d, proj.data(), n);
#pragma omp parallel for
        for (int64_t s = 0; s < n; ++s) {
          float l1 = 0;
          for (int64_t o = 0; o < hidden; ++o) l1 += std::fabs(proj[s * hidden + o]);
          out[s0 + s] += l1 / static_cast<float>(group);
        }
      }
    }
  }
}

Selection CriticalKvPolicy::Select(const SelectionRequest& r, Backend& backend) const {
  const LayerKv L = r.Candidates();
  const int64_t len = L.len, kvh = L.kv.n_kv_heads;
  std::vector<float> s, computed;
  base_->Score(r, backend, &s);
  if (r.probe_slots > 0) s = DropTrailingSlots(s, kvh, r.layer.len, r.probe_slots);
  absl::Span<const float> norms = r.value_norms;
  if (norms.empty()) {
    ProjectedValueNorms(r.WithoutProbe(), backend, &computed);
    norms = computed;
  }
  const int64_t n1 = static_cast<int64_t>(std::floor(static_cast<double>(r.n_keep) * first_stage_ratio_));
  std::vector<float> merged(s.size());
  for (int64_t g = 0; g < kvh; ++g) {
    const absl::Span<const float> base = absl::MakeConstSpan(s).subspan(g * len, len);
    for (int64_t j = 0; j < len; ++j) merged[g * len + j] = (base[j] + eps_) * norms[g * len + j];
    // Stage 1 winners outrank every stage-2 score.
    for (int32_t j : TopNAscending(base, n1)) merged[g * len + j] = std::numeric_limits<float>::max();
  }
  return SelectTopPerHead(L, merged, r.n_keep);
}

}  // namespace kvserve
