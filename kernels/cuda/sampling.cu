// Greedy sampling on the device: the argmax of each logits row, so only 4 bytes per row cross
// to the host instead of the whole row. The same rule as Sampler's greedy draw: NaN counts as
// -inf, +inf as the largest float, the lowest id wins ties, and a row of only -inf gives 0.
#include <cfloat>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"

namespace kvserve::cuda {
namespace {

constexpr int kThreads = 512;

__device__ inline void Better(float v, int32_t i, float& best, int32_t& best_i) {
  if (isnan(v)) v = -INFINITY;
  if (v == INFINITY) v = FLT_MAX;
  if (v > best || (v == best && i < best_i)) {
    best = v;
    best_i = i;
  }
}

__global__ void ArgmaxKernel(const float* __restrict__ logits,  // [rows, vocab]
                             int32_t* __restrict__ out,         // [rows]
                             int64_t vocab) {
  const float* row = logits + blockIdx.x * vocab;
  float best = -INFINITY;
  int32_t best_i = INT32_MAX;  // any index beats it, so a row of -inf ends at its lowest, 0
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) Better(row[i], static_cast<int32_t>(i), best, best_i);
  for (int off = 16; off > 0; off >>= 1) {
    Better(__shfl_xor_sync(0xffffffffu, best, off), __shfl_xor_sync(0xffffffffu, best_i, off), best, best_i);
  }
  __shared__ float sv[kThreads / 32];
  __shared__ int32_t si[kThreads / 32];
  if (threadIdx.x % 32 == 0) {
    sv[threadIdx.x / 32] = best;
    si[threadIdx.x / 32] = best_i;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) Better(sv[w], si[w], best, best_i);
    out[blockIdx.x] = best_i;
  }
}

}  // namespace

void ArgmaxRows(const float* logits, int32_t* out, int64_t rows, int64_t vocab, cudaStream_t stream) {
  if (rows <= 0) return;
  ArgmaxKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, out, vocab);
  KVSERVE_LAUNCH_CHECK();
}

}  // namespace kvserve::cuda
