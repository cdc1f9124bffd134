// y = x * W^T for weights of any stored type: quantized dots for few tokens, BLAS for many.
#pragma once
#include <cstdint>

#include "kernels/backend.h"

namespace kvserve::cpu {

// Below QuantDotMaxTokens() tokens a Q4_0/Q4_1/Q8_0 weight is multiplied with activations
// quantized per 32-block (memory-bound decode, the arithmetic llama.cpp uses there); from it on,
// and for every other type, weight tiles are dequantized and fed to OpenBLAS sgemm in fp32,
// which keeps prefill logits within ~0.01 of an fp64 reference (8-bit activations move them
// ~0.2). The bound is the active kernel table's (kernel_table.h), 64 tokens for both ISAs: their
// token-batch kernels (QuantDotRowsTokens) unpack each weight block once for four tokens and
// beat dequantize + sgemm for a step of up to 64 batched decodes (docs/PERF.md: the old bound
// of 8 made 8 concurrent requests decode slower in total than one). Prompts of 64 tokens and
// more keep sgemm's fp32 precision. The row-tile kernels (weight rows transposed 16 at a
// time; AVX-512: Q4_1 and Q8_0, 2.5-3.7x the token kernel's rate from 32 tokens on; AVX2: Q4_1,
// 2.2x) take steps of quant_dot_tile_min_tokens and more, except under kBatchInvariant.
int64_t QuantDotMaxTokens();

// OpenBLAS's own thread pool stays at one thread: our OpenMP threads each call sgemm on their
// own tile (two spinning pools on the same cores made prefill 7x slower). Call before sgemm.
void UseSingleThreadedBlas();

// y[n, w.rows] = x[n, w.cols] * w^T.
void MatMul(const WeightView& w, const float* x, float* y, int64_t n);

// ys[i] = x * ws[i]^T for i < count. When every weight takes the same quantized activation
// type and n is small, x is quantized once and all products share one parallel loop (a
// decode step's q/k/v or gate/up: fewer thread fork/joins); otherwise MatMul per weight.
// kBatchInvariant computes every token's row on its own with one kernel whatever n is: the
// quantized dots for quantized weights (as decode does), a fixed-order fp32 dot otherwise.
void MatMulShared(const WeightView* ws, float* const* ys, int64_t count, const float* x, int64_t n,
                  Determinism determinism = Determinism::kFastest);

// The same product computed row by row in double precision from dequantized weights:
// the reference MatMul is tested against.
void MatMulReference(const WeightView& w, const float* x, float* y, int64_t n);

}  // namespace kvserve::cpu
