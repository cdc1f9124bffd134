// The CPU implementations behind CpuBackend, one op family per .cc file. Shapes as in
// kernels/backend.h. These are the reference every other backend is tested against.
#pragma once
#include <cstdint>

#include "kernels/backend.h"

namespace kvserve::cpu {

// rms_norm.cc
void RmsNorm(const float* x, const float* gain, float* out, int64_t n, int64_t dim, float eps);

// rope.cc
void Rope(float* x, const int32_t* positions, int64_t n, int64_t n_heads, int64_t head_dim,
          const float* inv_freq, int64_t rot_dim, bool neox);

// elementwise.cc
void Embed(const WeightView& table, const int32_t* tokens, int64_t n, float* out);
void AddBias(float* y, const float* bias, int64_t n, int64_t dim);
void SwiGlu(const float* gate, const float* up, float* out, int64_t n);
void Add(float* x, const float* y, int64_t n);

// paged_attention.cc
void WriteKv(const PagedKv& kv, const AttentionBatch& batch, const float* k, const float* v);
// With kBatchInvariant, a query row's output depends only on its own query and the keys it
// sees: keys are split at fixed positions and every tile takes the per-row loops, never sgemm.
void PagedAttention(const PagedKv& kv, const AttentionBatch& batch, const AttentionShape& shape,
                    const float* q, float* out, Determinism determinism = Determinism::kFastest);

}  // namespace kvserve::cpu
