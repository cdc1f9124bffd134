// Embedding lookup, bias add, SwiGLU and residual add.
#include <cmath>
#include <cstring>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/dequantize.h"

namespace kvserve::cpu {

void Embed(const WeightView& table, const int32_t* tokens, int64_t n, float* out) {
  const int64_t row_bytes = RowBytes(table.dtype, table.cols);
  for (int64_t t = 0; t < n; ++t) {
    const auto* row = static_cast<const uint8_t*>(table.data) + tokens[t] * row_bytes;
    DequantizeRow(table.dtype, row, out + t * table.cols, table.cols);
  }
}

void AddBias(float* y, const float* bias, int64_t n, int64_t dim) {
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t i = 0; i < dim; ++i) y[t * dim + i] += bias[i];
  }
}

void SwiGlu(const float* gate, const float* up, float* out, int64_t n) {
#pragma omp parallel for simd schedule(static) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void Add(float* x, const float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

}  // namespace kvserve::cpu
