// Rotary position embedding, adjacent-pair (GGUF llama) or half-split (neox, HF) pairing.
#include <cmath>

#include "kernels/cpu/cpu_ops.h"

namespace kvserve::cpu {

void Rope(float* x, const int32_t* positions, int64_t n, int64_t n_heads, int64_t head_dim,
          const float* inv_freq, int64_t rot_dim, bool neox) {
  const int64_t half = rot_dim / 2;
#pragma omp parallel for schedule(static) if (n > 4)
  for (int64_t t = 0; t < n; ++t) {
    const float pos = static_cast<float>(positions[t]);
    for (int64_t i = 0; i < half; ++i) {
      const float angle = pos * inv_freq[i];
      const float c = std::cos(angle), s = std::sin(angle);
      for (int64_t h = 0; h < n_heads; ++h) {
        float* v = x + (t * n_heads + h) * head_dim;
        const int64_t a = neox ? i : 2 * i;
        const int64_t b = neox ? i + half : 2 * i + 1;
        const float x0 = v[a], x1 = v[b];
        v[a] = x0 * c - x1 * s;
        v[b] = x0 * s + x1 * c;
      }
    }
  }
}

}  // namespace kvserve::cpu
