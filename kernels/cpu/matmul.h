// y = x * W^T for weights of any stored type: quantized dots for few tokens, BLAS for many.
#pragma once
#include <cstdint>

#include "kernels/backend.h"

namespace kvserve::cpu {

// Below this many tokens a quantized weight is multiplied with quantized activations
// (memory-bound decode); from it on, weight tiles are dequantized and fed to sgemm.
constexpr int64_t kQuantDotMaxTokens = 8;

// y[n, w.rows] = x[n, w.cols] * w^T.
void MatMul(const WeightView& w, const float* x, float* y, int64_t n);

// The same product computed row by row in double precision from dequantized weights:
// the reference MatMul is tested against.
void MatMulReference(const WeightView& w, const float* x, float* y, int64_t n);

}  // namespace kvserve::cpu
