// MatMul on the CPU: quantized dot products (OpenMP over rows) or dequantize + OpenBLAS sgemm.
#include "kernels/cpu/matmul.h"

#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "kernels/cpu/avx2_sum.h"
#include "kernels/cpu/dequantize.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/quant_dot.h"

namespace kvserve::cpu {
namespace {

const uint8_t* RowPtr(const WeightView& w, int64_t r) {
  return static_cast<const uint8_t*>(w.data) + r * RowBytes(w.dtype, w.cols);
}

// x[n, cols] quantized per 32-block to act_type, into a thread-local buffer.
const uint8_t* QuantizeActivations(const float* x, int64_t n, int64_t cols, DType act_type) {
  const int64_t act_row_bytes = RowBytes(act_type, cols);
  thread_local std::vector<uint8_t> act;
  act.resize(static_cast<size_t>(act_row_bytes * n));
  for (int64_t t = 0; t < n; ++t) {
    if (act_type == DType::kQ8_1) {
      QuantizeRowQ8_1(x + t * cols, act.data() + t * act_row_bytes, cols);
    } else {
      QuantizeRowQ8_0(x + t * cols, act.data() + t * act_row_bytes, cols);
    }
  }
  return act.data();
}

// Tasks of kRowsPerTask weight rows (a multiple of four, so the AVX2 Q4_1 kernel's row groups
// never straddle two tasks) over the weights ws[0..count), all multiplied with the same
// quantized activations a. Batch-invariant steps use the token kernel whose bits equal the
// one-token kernel's; others, from the table's threshold on, the faster row-tile kernel where
// the ISA has one.
void QuantDotTasks(const WeightView* ws, float* const* ys, int64_t count, const uint8_t* a, int64_t n,
                   DType act_type, bool invariant) {
  const CpuKernels& kernels = ActiveKernels();
  QuantDotRowsTokensFn* dot_tokens = kernels.quant_dot_rows_tokens;
  if (!invariant && kernels.quant_dot_tile_tokens != nullptr && n >= kernels.quant_dot_tile_min_tokens) {
    dot_tokens = kernels.quant_dot_tile_tokens;
  }
  constexpr int64_t kRowsPerTask = 16;
  int64_t first[9] = {0};  // tasks of weight i: [first[i], first[i + 1]); count <= 8
  for (int64_t i = 0; i < count; ++i) first[i + 1] = first[i] + (ws[i].rows + kRowsPerTask - 1) / kRowsPerTask;
  const int64_t act_row_bytes = RowBytes(act_type, ws[0].cols);
#pragma omp parallel for schedule(static)
  for (int64_t task = 0; task < first[count]; ++task) {
    int64_t i = 0;
    while (task >= first[i + 1]) ++i;
    const WeightView& w = ws[i];
    const int64_t r0 = (task - first[i]) * kRowsPerTask;
    const int64_t rows = std::min(kRowsPerTask, w.rows - r0);
    const int64_t row_bytes = RowBytes(w.dtype, w.cols);
    dot_tokens(w.dtype, RowPtr(w, r0), row_bytes, rows, a, act_row_bytes, n, w.cols, ys[i] + r0, w.rows);
  }
}

// a . b with a rounding that depends on nothing but the inputs (sgemm's may change with the
// number of tokens): two 8-lane chains, summed in one fixed order, then the tail.
float DotF32InFixedOrder(const float* a, const float* b, int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
  }
  float sum = HorizontalSum(_mm256_add_ps(s0, s1));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// Each OpenMP thread dequantizes a tile of weight rows and runs a single-threaded sgemm on it
// (see UseSingleThreadedBlas), or, batch-invariant, a fixed-order dot per row and token.
constexpr int64_t kTileRows = 64;

void MatMulDequantBlas(const WeightView& w, const float* x, float* y, int64_t n, bool per_token) {
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
      if (per_token) {
        for (int64_t t = 0; t < n; ++t) {
          for (int64_t r = 0; r < rows; ++r) y[t * w.rows + r0 + r] = DotF32InFixedOrder(wt + r * w.cols, x + t * w.cols, w.cols);
        }
      } else {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, rows, w.cols, 1.0f, x, w.cols, wt,
                    w.cols, 0.0f, y + r0, w.rows);
      }
    }
  }
}

}  // namespace

void UseSingleThreadedBlas() {
  static const bool once = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)once;
}

int64_t QuantDotMaxTokens() { return ActiveKernels().quant_dot_max_tokens; }

void MatMul(const WeightView& w, const float* x, float* y, int64_t n) { MatMulShared(&w, &y, 1, x, n); }

void MatMulShared(const WeightView* ws, float* const* ys, int64_t count, const float* x, int64_t n,
                  Determinism determinism) {
  if (count <= 0) return;
  const bool invariant = determinism == Determinism::kBatchInvariant;
  // Batch-invariant: the decode kernel for every token count (each token's row is quantized
  // and dotted on its own, and a row's bits do not depend on how rows are grouped).
  const int64_t dot_below = invariant ? std::numeric_limits<int64_t>::max() : QuantDotMaxTokens();
  const DType act = ActivationTypeFor(ws[0].dtype);
  bool fused = act != DType::kF32 && n < dot_below && count <= 8;
  for (int64_t i = 1; i < count && fused; ++i) {
    fused = ActivationTypeFor(ws[i].dtype) == act && ws[i].cols == ws[0].cols;
  }
  if (fused) {
    QuantDotTasks(ws, ys, count, QuantizeActivations(x, n, ws[0].cols, act), n, act, invariant);
    return;
  }
  for (int64_t i = 0; i < count; ++i) {
    const DType a = ActivationTypeFor(ws[i].dtype);
    if (a != DType::kF32 && n < dot_below) {
      QuantDotTasks(ws + i, ys + i, 1, QuantizeActivations(x, n, ws[i].cols, a), n, a, invariant);
    } else {
      MatMulDequantBlas(ws[i], x, ys[i], n, invariant);
    }
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
