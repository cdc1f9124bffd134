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
  const int64_t row_bytes = RowBytes(w.dtype, w.cols);
  constexpr int64_t kRowsPerTask = 16;  // even, so Q4_1 row pairs never straddle two tasks
  const int64_t n_tasks = (w.rows + kRowsPerTask - 1) / kRowsPerTask;
#pragma omp parallel for schedule(static)
  for (int64_t task = 0; task < n_tasks; ++task) {
    const int64_t r0 = task * kRowsPerTask;
    const int64_t rows = std::min(kRowsPerTask, w.rows - r0);
    for (int64_t t = 0; t < n; ++t) {
      QuantDotRows(w.dtype, RowPtr(w, r0), row_bytes, rows, a + t * act_row_bytes, w.cols,
                   y + t * w.rows + r0, 1);
    }
  }
}

// Each OpenMP thread dequantizes a tile of weight rows and runs a single-threaded sgemm on
// it. OpenBLAS's own thread pool stays at one thread: two spinning pools on the same cores
// (OpenMP for our loops, pthreads inside OpenBLAS) made prefill 7x slower here.
constexpr int64_t kTileRows = 64;

void UseSingleThreadedBlas() {
  static const bool once = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)once;
}

void MatMulDequantBlas(const WeightView& w, const float* x, float* y, int64_t n) {
  UseSingleThreadedBlas();
  const int64_t n_tiles = (w.rows + kTileRows - 1) / kTileRows;
#pragma omp parallel
  {
    std::vector<float> scratch;
#pragma omp for schedule(dynamic, 1)
    for (int64_t tile = 0; tile < n_tiles; ++tile) {
      const int64_t r0 = tile * kTileRows;
      const int64_t rows = std::min(kTileRows, w.rows - r0);
      const float* wt;
      if (w.dtype == DType::kF32) {
        wt = static_cast<const float*>(w.data) + r0 * w.cols;
      } else {
        scratch.resize(static_cast<size_t>(rows * w.cols));
        for (int64_t r = 0; r < rows; ++r) DequantizeRow(w.dtype, RowPtr(w, r0 + r), scratch.data() + r * w.cols, w.cols);
        wt = scratch.data();
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, rows, w.cols, 1.0f, x, w.cols, wt,
                  w.cols, 0.0f, y + r0, w.rows);
    }
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
