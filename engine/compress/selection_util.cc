#include "engine/compress/selection_util.h"

#include <algorithm>
#include <numeric>

namespace kvserve {

std::vector<int32_t> TopNAscending(absl::Span<const float> scores, int64_t n) {
  std::vector<int32_t> idx(scores.size());
  std::iota(idx.begin(), idx.end(), 0);
  n = std::clamp<int64_t>(n, 0, static_cast<int64_t>(idx.size()));
  auto better = [&](int32_t a, int32_t b) { return scores[a] > scores[b] || (scores[a] == scores[b] && a < b); };
  std::nth_element(idx.begin(), idx.begin() + n, idx.end(), better);
  idx.resize(static_cast<size_t>(n));
  std::sort(idx.begin(), idx.end());
  return idx;
}

Selection SelectTopPerHead(const LayerKv& layer, absl::Span<const float> scores, int64_t n_keep) {
  const int64_t heads = layer.kv.n_kv_heads, len = layer.len;
  Selection sel;
  sel.n_keep = n_keep;
  sel.slots.reserve(static_cast<size_t>(heads * n_keep));
  sel.log_w.reserve(static_cast<size_t>(heads * n_keep));
  for (int64_t h = 0; h < heads; ++h) {
    for (int32_t s : TopNAscending(scores.subspan(h * len, len), n_keep)) {
      sel.slots.push_back(s);
      sel.log_w.push_back(layer.LogWeight(s, h));
    }
  }
  return sel;
}

std::vector<float> DropTrailingSlots(absl::Span<const float> scores, int64_t heads, int64_t len, int64_t drop) {
  const int64_t kept = len - drop;
  std::vector<float> out(static_cast<size_t>(heads * kept));
  for (int64_t h = 0; h < heads; ++h) std::copy_n(scores.begin() + h * len, kept, out.begin() + h * kept);
  return out;
}

void GatherHead(const LayerKv& layer, int64_t h, bool values, float* out, int64_t first) {
  const int64_t d = layer.kv.head_dim;
  for (int64_t s = first; s < layer.len; ++s) {
    if (values) {
      layer.Value(s, h, out + (s - first) * d);
    } else {
      layer.Key(s, h, out + (s - first) * d);
    }
  }
}

}  // namespace kvserve
