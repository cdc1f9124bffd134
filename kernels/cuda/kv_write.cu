// Writes this step's new K/V rows into their page slots (slots resolved on the host from
// the page tables) and sets their log-weights to 0.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"

namespace kvserve::cuda {
namespace {

__global__ void WriteKvKernel(float* __restrict__ k_pages,        // [num_pages, page_size, n_kv_heads, head_dim]
                              float* __restrict__ v_pages,        // [num_pages, page_size, n_kv_heads, head_dim]
                              float* __restrict__ log_w,          // [num_pages, page_size, n_kv_heads]
                              const int32_t* __restrict__ slots,  // [n_tokens]
                              const float* __restrict__ k,        // [n_tokens, n_kv_heads, head_dim]
                              const float* __restrict__ v,        // [n_tokens, n_kv_heads, head_dim]
                              int64_t n_kv_heads, int64_t head_dim) {
  const int64_t t = blockIdx.x;
  const int64_t row = n_kv_heads * head_dim;
  const int64_t slot = slots[t];
  for (int64_t i = threadIdx.x; i < row; i += blockDim.x) {
    k_pages[slot * row + i] = k[t * row + i];
    v_pages[slot * row + i] = v[t * row + i];
  }
  for (int64_t h = threadIdx.x; h < n_kv_heads; h += blockDim.x) log_w[slot * n_kv_heads + h] = 0.0f;
}

}  // namespace

void WriteKv(float* k_pages, float* v_pages, float* log_w, const int32_t* slots, const float* k, const float* v,
             int64_t n_tokens, int64_t n_kv_heads, int64_t head_dim, cudaStream_t stream) {
  if (n_tokens <= 0) return;
  WriteKvKernel<<<static_cast<unsigned>(n_tokens), 256, 0, stream>>>(k_pages, v_pages, log_w, slots, k, v,
                                                                     n_kv_heads, head_dim);
  KVSERVE_LAUNCH_CHECK();
}

}  // namespace kvserve::cuda
