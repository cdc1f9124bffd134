#include "engine/compress/keydiff_scorer.h"

#include <cmath>

#include "engine/compress/selection_util.h"

namespace kvserve {

void KeyDiffScorer::Score(const SelectionRequest& r, Backend&, std::vector<float>* scores) const {
  const LayerKv& L = r.layer;
  const int64_t len = L.len, d = L.kv.head_dim, kvh = L.kv.n_kv_heads;
  scores->assign(static_cast<size_t>(kvh * len), 0.0f);
  std::vector<float> keys(static_cast<size_t>(len * d));
  std::vector<double> norm(static_cast<size_t>(len)), anchor(static_cast<size_t>(d));
  for (int64_t g = 0; g < kvh; ++g) {
    GatherHead(L, g, /*values=*/false, keys.data());
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

}  // namespace kvserve
