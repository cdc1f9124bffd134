// Dot products of quantized weight rows with quantized activations (the decode hot path).
// Activations are quantized per 32-element block, as GGML does, so results track llama.cpp.
#pragma once
#include <cstdint>

#include "kernels/dtype.h"

namespace kvserve::cpu {

// Type the activations are quantized to for a dot with a weight row of type w
// (Q8_1 for Q4_1, Q8_0 for Q4_0 and Q8_0). kF32 means: no quantized dot for w.
DType ActivationTypeFor(DType w);

// x[n] -> n/32 blocks of Q8_0 / Q8_1 at dst.
void QuantizeRowQ8_0(const float* x, void* dst, int64_t n);
void QuantizeRowQ8_1(const float* x, void* dst, int64_t n);

// Dot of one weight row (type w, n elements) with an activation row quantized to
// ActivationTypeFor(w). AVX2 or AVX-512, as kernel_table.h chose for this CPU.
float QuantDot(DType w, const void* w_row, const void* act_row, int64_t n);

// out[r * out_stride] = QuantDot of rows r in [0, n_rows) (row r at w_rows + r * row_bytes)
// with one activation row. Q4_1 rows go two at a time so each activation block is loaded
// once per pair — the decode hot loop.
void QuantDotRows(DType w, const uint8_t* w_rows, int64_t row_bytes, int64_t n_rows,
                  const void* act_row, int64_t n, float* out, int64_t out_stride);

// out[t * out_token_stride + r] = QuantDot of rows r in [0, n_rows) with activation rows t in
// [0, n_tokens) (row t at act_rows + t * act_row_bytes): a batch of tokens against a tile of
// weight rows, each weight block unpacked once for all tokens where the ISA has the registers.
// Each result has the same bits as QuantDotRows gives it alone, whatever n_tokens is.
void QuantDotRowsTokens(DType w, const uint8_t* w_rows, int64_t row_bytes, int64_t n_rows, const uint8_t* act_rows,
                        int64_t act_row_bytes, int64_t n_tokens, int64_t n, float* out, int64_t out_token_stride);

// Plain scalar versions: the reference the SIMD versions are tested against.
float QuantDotReference(DType w, const void* w_row, const void* act_row, int64_t n);

}  // namespace kvserve::cpu
