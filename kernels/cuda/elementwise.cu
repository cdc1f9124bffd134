// Element-wise kernels: fp32 -> bf16 conversion, embedding gather, bias, SwiGLU, residual add.
#include <algorithm>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"

namespace kvserve::cuda {
namespace {

constexpr int kThreads = 256;

int Blocks(int64_t n) { return static_cast<int>(std::min<int64_t>((n + kThreads - 1) / kThreads, 65535 * 8)); }

__global__ void F32ToBf16Kernel(const float* __restrict__ x,   // [n]
                                __nv_bfloat16* __restrict__ y,  // [n]
                                int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    y[i] = __float2bfloat16(x[i]);
  }
}

__global__ void EmbedKernel(const __nv_bfloat16* __restrict__ table,  // [vocab, dim]
                            const int32_t* __restrict__ tokens,       // [n]
                            float* __restrict__ out,                  // [n, dim]
                            int64_t dim) {
  const int64_t t = blockIdx.x;
  const __nv_bfloat16* row = table + tokens[t] * dim;
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) out[t * dim + i] = __bfloat162float(row[i]);
}

__global__ void AddBiasKernel(float* __restrict__ y,           // [n, dim]
                              const float* __restrict__ bias,  // [dim]
                              int64_t n, int64_t dim) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n * dim; i += int64_t{gridDim.x} * blockDim.x) {
    y[i] += bias[i % dim];
  }
}

__global__ void SwiGluKernel(const float* gate,  // [n]
                             const float* up,    // [n]
                             float* out,         // [n], may alias gate
                             int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float g = gate[i];
    out[i] = g / (1.0f + expf(-g)) * up[i];
  }
}

__global__ void AddKernel(float* __restrict__ x,        // [n]
                          const float* __restrict__ y,  // [n]
                          int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    x[i] += y[i];
  }
}

}  // namespace

void F32ToBf16(const float* x, __nv_bfloat16* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  F32ToBf16Kernel<<<Blocks(n), kThreads, 0, stream>>>(x, y, n);
  KVSERVE_LAUNCH_CHECK();
}

void EmbedBf16(const __nv_bfloat16* table, const int32_t* tokens, float* out, int64_t n, int64_t dim,
               cudaStream_t stream) {
  if (n <= 0) return;
  EmbedKernel<<<static_cast<unsigned>(n), kThreads, 0, stream>>>(table, tokens, out, dim);
  KVSERVE_LAUNCH_CHECK();
}

void AddBias(float* y, const float* bias, int64_t n, int64_t dim, cudaStream_t stream) {
  if (n * dim <= 0) return;
  AddBiasKernel<<<Blocks(n * dim), kThreads, 0, stream>>>(y, bias, n, dim);
  KVSERVE_LAUNCH_CHECK();
}

void SwiGlu(const float* gate, const float* up, float* out, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  SwiGluKernel<<<Blocks(n), kThreads, 0, stream>>>(gate, up, out, n);
  KVSERVE_LAUNCH_CHECK();
}

void Add(float* x, const float* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  AddKernel<<<Blocks(n), kThreads, 0, stream>>>(x, y, n);
  KVSERVE_LAUNCH_CHECK();
}

}  // namespace kvserve::cuda
