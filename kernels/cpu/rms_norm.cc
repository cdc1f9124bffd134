// RMSNorm; the sum of squares is kept in double, as llama.cpp does, for long rows.
#include <cmath>

#include "kernels/cpu/cpu_ops.h"

namespace kvserve::cpu {

void RmsNorm(const float* x, const float* gain, float* out, int64_t n, int64_t dim, float eps) {
#pragma omp parallel for schedule(static) if (n > 4)
  for (int64_t t = 0; t < n; ++t) {
    const float* xr = x + t * dim;
    double sum = 0.0;
    for (int64_t i = 0; i < dim; ++i) sum += static_cast<double>(xr[i]) * xr[i];
    const float scale = 1.0f / std::sqrt(static_cast<float>(sum / dim) + eps);
    float* o = out + t * dim;
    for (int64_t i = 0; i < dim; ++i) o[i] = xr[i] * scale * gain[i];
  }
}

}  // namespace kvserve::cpu
