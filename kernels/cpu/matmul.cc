// MatMul on the CPU: quantized dot products (OpenMP over rows) or dequantize + OpenBLAS sgemm.
#include "kernels/cpu/matmul.h"

#include <cblas.h>

#include <algorithm>
#include <vector>

#include "kernels/cpu/dequantize.h"
#include "kernels/cpu/quant_dot.h"

namespace kvserve::cpu {
namespace {

const uint8_t* RowPtr(const WeightView& w, int64_t r) {
  return static_cast<const uint8_t*>(w.data) + r * RowBytes(w.dtype, w.cols);
}

void MatMulQuantDot(const WeightView& w, const float* x, float* y, int64_t n, DType act_type) {
  const int64_t act_row_bytes = RowBytes(act_type, w.cols);
  thread_local std::vector<uint8_t> act;
  act.resize(static_cast<size_t>(act_row_bytes * n));
  for (int64_t t = 0; t < n; ++t) {
    if (act_type == DType::kQ8_1) {
      QuantizeRowQ8_1(x + t * w.cols, act.data() + t * act_row_bytes, w.cols);
    } else {
      QuantizeRowQ8_0(x + t * w.cols, act.data() + t * act_row_bytes, w.cols);
    }
  }
  const uint8_t* a = act.data();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < w.rows; ++r) {
    const uint8_t* wr = RowPtr(w, r);
    for (int64_t t = 0; t < n; ++t) {
      y[t * w.rows + r] = QuantDot(w.dtype, wr, a + t * act_row_bytes, w.cols);
    }
  }
}

// Rows per dequantized tile: bounds the scratch to ~64 MB for the widest weights.
int64_t TileRows(int64_t cols) { return std::max<int64_t>(64, (int64_t{16} << 20) / cols); }

void MatMulDequantBlas(const WeightView& w, const float* x, float* y, int64_t n) {
  if (w.dtype == DType::kF32) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, w.rows, w.cols, 1.0f, x, w.cols,
                static_cast<const float*>(w.data), w.cols, 0.0f, y, w.rows);
    return;
  }
  const int64_t tile = std::min(w.rows, TileRows(w.cols));
  thread_local std::vector<float> scratch;
  scratch.resize(static_cast<size_t>(tile * w.cols));
  float* s = scratch.data();
  for (int64_t r0 = 0; r0 < w.rows; r0 += tile) {
    const int64_t rows = std::min(tile, w.rows - r0);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) DequantizeRow(w.dtype, RowPtr(w, r0 + r), s + r * w.cols, w.cols);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, rows, w.cols, 1.0f, x, w.cols, s,
                w.cols, 0.0f, y + r0, w.rows);
  }
}

}  // namespace

void MatMul(const WeightView& w, const float* x, float* y, int64_t n) {
  const DType act = ActivationTypeFor(w.dtype);
  if (act != DType::kF32 && n < kQuantDotMaxTokens) {
    MatMulQuantDot(w, x, y, n, act);
  } else {
    MatMulDequantBlas(w, x, y, n);
  }
}

void MatMulReference(const WeightView& w, const float* x, float* y, int64_t n) {
  std::vector<float> row(static_cast<size_t>(w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    DequantizeRow(w.dtype, RowPtr(w, r), row.data(), w.cols);
    for (int64_t t = 0; t < n; ++t) {
      double acc = 0.0;
      for (int64_t c = 0; c < w.cols; ++c) acc += static_cast<double>(row[c]) * x[t * w.cols + c];
      y[t * w.rows + r] = static_cast<float>(acc);
    }
  }
}

}  // namespace kvserve::cpu
