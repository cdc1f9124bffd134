#include "engine/compress/keydiff_policy.h"

#include <cmath>

namespace kvserve {

void KeyDiffScores(const LayerKv& L, std::vector<float>* scores) {
  const int64_t len = L.len, d = L.kv.head_dim, kvh = L.kv.n_kv_heads;
  scores->assign(static_cast<size_t>(kvh * len), 0.0f);
  std::vector<float> keys(static_cast<size_t>(len * d));
  std::vector<double> norm(static_cast<size_t>(len)), anchor(static_cast<size_t>(d));
  for (int64_t g = 0; g < kvh; ++g) {
    for (int64_t s = 0; s < len; ++s) L.Key(s, g, keys.data() + s * d);
    std::fill(anchor.begin(), anchor.end(), 0.0);
    for (int64_t s = 0; s < len; ++s) {
      const float* k = keys.data() + s * d;
      double sq = 0;
      for (int64_t e = 0; e < d; ++e) sq += static_cast<double>(k[e]) * k[e];
      // A zero key has no direction: it adds nothing to the anchor and scores 0 below.
      norm[s] = std::sqrt(sq);
      if (norm[s] > 0) {
        for (int64_t e = 0; e < d; ++e) anchor[e] += k[e] / norm[s];
      }
    }
    double anchor_sq = 0;
    for (int64_t e = 0; e < d; ++e) anchor_sq += anchor[e] * anchor[e];
    const double anchor_norm = std::sqrt(anchor_sq);
    float* out = scores->data() + g * len;
    for (int64_t s = 0; s < len; ++s) {
      if (norm[s] == 0 || anchor_norm == 0) continue;
      const float* k = keys.data() + s * d;
      double dot = 0;
      for (int64_t e = 0; e < d; ++e) dot += k[e] * anchor[e];
      out[s] = static_cast<float>(-dot / (norm[s] * anchor_norm));
    }
  }
}

void KeyDiffPolicy::Score(const SelectionRequest& r, Backend& backend, BackendScratch&, float* scores) const {
  std::vector<float> all;
  KeyDiffScores(r.layer, &all);
  const int64_t heads = r.layer.kv.n_kv_heads, scored = r.layer.len, len = scored - r.probe_slots;
  for (int64_t h = 0; h < heads; ++h) {
    backend.CopyIn(scores + h * len, all.data() + h * scored, static_cast<int64_t>(sizeof(float)) * len);
  }
}

}  // namespace kvserve
