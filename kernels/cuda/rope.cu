// Rotary position embedding in place: one thread per (token, head, pair). The inverse
// frequencies come precomputed (llama3 / linear scaling already applied on the host), so
// the kernel is the same for every scaling type.
#include <algorithm>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"

namespace kvserve::cuda {
namespace {

__global__ void RopeKernel(float* __restrict__ x,                // [n, n_heads, head_dim]
                           const int32_t* __restrict__ positions,  // [n]
                           const float* __restrict__ inv_freq,     // [rot_dim / 2]
                           int64_t n, int64_t n_heads, int64_t head_dim, int64_t half, bool neox) {
  const int64_t total = n * n_heads * half;
  for (int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; idx < total;
       idx += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = idx % half;
    const int64_t th = idx / half;  // token * n_heads + head
    const int64_t t = th / n_heads;
    // Same fp32 angle as the CPU reference; sincosf (not the fast __sincosf) for large positions.
    const float angle = static_cast<float>(positions[t]) * inv_freq[i];
    float s, c;
    sincosf(angle, &s, &c);
    float* v = x + th * head_dim;
    const int64_t a = neox ? i : 2 * i;
    const int64_t b = neox ? i + half : 2 * i + 1;
    const float x0 = v[a], x1 = v[b];
    v[a] = x0 * c - x1 * s;
    v[b] = x0 * s + x1 * c;
  }
}

}  // namespace

void Rope(float* x, const int32_t* positions, const float* inv_freq, int64_t n, int64_t n_heads,
          int64_t head_dim, int64_t rot_dim, bool neox, cudaStream_t stream) {
  const int64_t total = n * n_heads * (rot_dim / 2);
  if (total <= 0) return;
  const int threads = 256;
  const int blocks = static_cast<int>(std::min<int64_t>((total + threads - 1) / threads, 65535 * 8));
  RopeKernel<<<blocks, threads, 0, stream>>>(x, positions, inv_freq, n, n_heads, head_dim, rot_dim / 2, neox);
  KVSERVE_LAUNCH_CHECK();
}

}  // namespace kvserve::cuda
