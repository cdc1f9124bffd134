// Paged attention for any head_dim <= 256 and any GQA group: one block per (query row,
// head), 128 keys per online-softmax step. Simple rather than fast; it serves the shapes the
// specialized decode/prefill kernels do not (e.g. random:tiny's head_dim 16).
#include <cfloat>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"

namespace kvserve::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kMaxHeadDim = 256;
constexpr float kNegInf = -INFINITY;

__device__ inline float BlockReduce(float x, bool is_max, float* scratch) {
  for (int off = 16; off > 0; off >>= 1) {
    const float y = __shfl_xor_sync(0xffffffffu, x, off);
    x = is_max ? fmaxf(x, y) : x + y;
  }
  __syncthreads();  // scratch may still be read from the previous reduction
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = x;
  __syncthreads();
  x = scratch[0];
  for (int w = 1; w < kThreads / 32; ++w) x = is_max ? fmaxf(x, scratch[w]) : x + scratch[w];
  return x;
}

__global__ void __launch_bounds__(kThreads)
GenericAttentionKernel(DevicePagedKv kv,
                       const float* __restrict__ q,              // [n_tokens, n_heads, head_dim]
                       const int32_t* __restrict__ token_seq,    // [n_tokens]
                       const int32_t* __restrict__ token_visible,  // [n_tokens]
                       float* __restrict__ out,                  // [n_tokens, n_heads, head_dim]
                       int n_heads, float scale) {
  const int t = blockIdx.x, h = blockIdx.y, hd = kv.head_dim;
  const int g = h / (n_heads / kv.n_kv_heads);
  const int32_t* pages = kv.page_indices + kv.page_indptr[token_seq[t]];
  const int visible = token_visible[t];
  const int64_t row = static_cast<int64_t>(kv.n_kv_heads) * hd;
  __shared__ float s_q[kMaxHeadDim];
  __shared__ float s_p[kThreads];
  __shared__ int64_t s_slot[kThreads];
  __shared__ float s_red[kThreads / 32];
  for (int d = threadIdx.x; d < hd; d += kThreads) s_q[d] = q[(static_cast<int64_t>(t) * n_heads + h) * hd + d];
  float m = kNegInf, l = 0.0f, acc0 = 0.0f, acc1 = 0.0f;  // acc for d = tid and tid + 128
  for (int c = 0; c < visible; c += kThreads) {
    __syncthreads();  // s_q written / previous chunk's s_p, s_slot read
    const int j = c + threadIdx.x;
    float s = kNegInf;
    if (j < visible) {
      const int64_t slot = static_cast<int64_t>(pages[j / kv.page_size]) * kv.page_size + j % kv.page_size;
      s_slot[threadIdx.x] = slot;
      const float* kj = kv.k + slot * row + static_cast<int64_t>(g) * hd;
      float dot = 0.0f;
      for (int d = 0; d < hd; ++d) dot = fmaf(s_q[d], kj[d], dot);
      s = dot * scale + kv.log_w[slot * kv.n_kv_heads + g];
    }
    const float new_m = fmaxf(m, BlockReduce(s, true, s_red));
    const float p = new_m == kNegInf ? 0.0f : expf(s - new_m);
    const float alpha = new_m == kNegInf ? 1.0f : expf(m - new_m);
    s_p[threadIdx.x] = p;
    l = l * alpha + BlockReduce(p, false, s_red);  // BlockReduce's barriers also publish s_p, s_slot
    m = new_m;
    acc0 *= alpha;
    acc1 *= alpha;
    const int n = min(kThreads, visible - c);
    for (int jj = 0; jj < n; ++jj) {
      const float* vj = kv.v + s_slot[jj] * row + static_cast<int64_t>(g) * hd;
      if (threadIdx.x < hd) acc0 = fmaf(s_p[jj], vj[threadIdx.x], acc0);
      if (threadIdx.x + kThreads < hd) acc1 = fmaf(s_p[jj], vj[threadIdx.x + kThreads], acc1);
    }
  }
  const float inv = l > 0.0f ? 1.0f / l : 0.0f;
  float* o = out + (static_cast<int64_t>(t) * n_heads + h) * hd;
  if (threadIdx.x < hd) o[threadIdx.x] = acc0 * inv;
  if (threadIdx.x + kThreads < hd) o[threadIdx.x + kThreads] = acc1 * inv;
}

}  // namespace

void GenericAttention(const DevicePagedKv& kv, const float* q, const int32_t* token_seq, const int32_t* token_visible,
                      float* out, int64_t n_tokens, int64_t n_heads, float scale, cudaStream_t stream) {
  if (n_tokens <= 0) return;
  if (kv.head_dim > kMaxHeadDim) {
    std::fprintf(stderr, "kvserve: CUDA attention supports head_dim <= %d, got %d\n", kMaxHeadDim, kv.head_dim);
    std::abort();
  }
  const dim3 grid(static_cast<unsigned>(n_tokens), static_cast<unsigned>(n_heads));
  GenericAttentionKernel<<<grid, kThreads, 0, stream>>>(kv, q, token_seq, token_visible, out,
                                                        static_cast<int>(n_heads), scale);
  KVSERVE_LAUNCH_CHECK();
}

}  // namespace kvserve::cuda
