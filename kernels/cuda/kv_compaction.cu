// Page compaction on the GPU: each KV head's kept entries (K, V, log-weight) move to its
// leading slots. A chunk of kept slots is first gathered into a scratch buffer and then
// written back, chunk after chunk in stream order: kept slots ascend (slots[h, i] >= i), so
// the writes of a chunk land on slots no later chunk reads, and within a chunk the scratch
// separates reads from writes. The freed pages are the tail of the host page list.
#include <algorithm>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"

namespace kvserve::cuda {
namespace {

__device__ int64_t Row(const int32_t* pages, int64_t s, int64_t page_size, int64_t n_kv_heads, int64_t h) {
  return (static_cast<int64_t>(pages[s / page_size]) * page_size + s % page_size) * n_kv_heads + h;
}

// Block i: kept entry c0 + i of every head into scratch row i.
__global__ void GatherChunkKernel(const float* __restrict__ k_pages,    // [num_pages, page_size, n_kv_heads, head_dim]
                                  const float* __restrict__ v_pages,    // [num_pages, page_size, n_kv_heads, head_dim]
                                  const float* __restrict__ log_w,      // [num_pages, page_size, n_kv_heads]
                                  const int32_t* __restrict__ pages,    // [ceil(len / page_size)]
                                  const int32_t* __restrict__ slots,    // [n_kv_heads, k]
                                  const float* __restrict__ new_log_w,  // [n_kv_heads, k] or null
                                  float* __restrict__ sk,               // [chunk, n_kv_heads, head_dim]
                                  float* __restrict__ sv,               // [chunk, n_kv_heads, head_dim]
                                  float* __restrict__ slw,              // [chunk, n_kv_heads]
                                  int64_t c0, int64_t k, int64_t page_size, int64_t n_kv_heads, int64_t head_dim) {
  const int64_t i = c0 + blockIdx.x, row = n_kv_heads * head_dim;
  for (int64_t idx = threadIdx.x; idx < row; idx += blockDim.x) {
    const int64_t h = idx / head_dim, e = idx % head_dim;
    const int64_t src = Row(pages, slots[h * k + i], page_size, n_kv_heads, h) * head_dim + e;
    sk[blockIdx.x * row + idx] = k_pages[src];
    sv[blockIdx.x * row + idx] = v_pages[src];
  }
  for (int64_t h = threadIdx.x; h < n_kv_heads; h += blockDim.x) {
    slw[blockIdx.x * n_kv_heads + h] =
        new_log_w ? new_log_w[h * k + i] : log_w[Row(pages, slots[h * k + i], page_size, n_kv_heads, h)];
  }
}

// Block i: scratch row i into slot c0 + i of every head.
__global__ void ScatterChunkKernel(float* __restrict__ k_pages,        // [num_pages, page_size, n_kv_heads, head_dim]
                                   float* __restrict__ v_pages,        // [num_pages, page_size, n_kv_heads, head_dim]
                                   float* __restrict__ log_w,          // [num_pages, page_size, n_kv_heads]
                                   const int32_t* __restrict__ pages,  // [ceil(len / page_size)]
                                   const float* __restrict__ sk,       // [chunk, n_kv_heads, head_dim]
                                   const float* __restrict__ sv,       // [chunk, n_kv_heads, head_dim]
                                   const float* __restrict__ slw,      // [chunk, n_kv_heads]
                                   int64_t c0, int64_t page_size, int64_t n_kv_heads, int64_t head_dim) {
  const int64_t i = c0 + blockIdx.x, row = n_kv_heads * head_dim;
  // Slot i of every head is one contiguous row of the page.
  const int64_t dst = Row(pages, i, page_size, n_kv_heads, 0);
  for (int64_t idx = threadIdx.x; idx < row; idx += blockDim.x) {
    k_pages[dst * head_dim + idx] = sk[blockIdx.x * row + idx];
    v_pages[dst * head_dim + idx] = sv[blockIdx.x * row + idx];
  }
  for (int64_t h = threadIdx.x; h < n_kv_heads; h += blockDim.x) log_w[dst + h] = slw[blockIdx.x * n_kv_heads + h];
}

__global__ void GatherPerHeadKernel(const float* __restrict__ src,      // [heads, src_stride]
                                    const int32_t* __restrict__ slots,  // [heads, k]
                                    float* __restrict__ dst,            // [heads, dst_stride]
                                    int64_t k, int64_t src_stride, int64_t dst_stride) {
  const int64_t h = blockIdx.y, i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < k) dst[h * dst_stride + i] = src[h * src_stride + slots[h * k + i]];
}

}  // namespace

size_t CompactKvScratchBytes(int64_t k, int64_t n_kv_heads, int64_t head_dim) {
  return sizeof(float) * static_cast<size_t>(std::min(k, kCompactChunk) * n_kv_heads * (2 * head_dim + 1));
}

void CompactKv(float* k_pages, float* v_pages, float* log_w, const int32_t* pages, const int32_t* slots,
               const float* new_log_w, void* scratch, int64_t k, int64_t page_size, int64_t n_kv_heads,
               int64_t head_dim, cudaStream_t stream) {
  const int64_t chunk = std::min(k, kCompactChunk), row = n_kv_heads * head_dim;
  auto* sk = static_cast<float*>(scratch);
  float* sv = sk + chunk * row;
  float* slw = sv + chunk * row;
  for (int64_t c0 = 0; c0 < k; c0 += chunk) {
    const unsigned n = static_cast<unsigned>(std::min(chunk, k - c0));
    GatherChunkKernel<<<n, 256, 0, stream>>>(k_pages, v_pages, log_w, pages, slots, new_log_w, sk, sv, slw, c0, k,
                                             page_size, n_kv_heads, head_dim);
    KVSERVE_LAUNCH_CHECK();
    ScatterChunkKernel<<<n, 256, 0, stream>>>(k_pages, v_pages, log_w, pages, sk, sv, slw, c0, page_size, n_kv_heads,
                                              head_dim);
    KVSERVE_LAUNCH_CHECK();
  }
}

void GatherPerHead(const float* src, const int32_t* slots, float* dst, int64_t heads, int64_t k, int64_t src_stride,
                   int64_t dst_stride, cudaStream_t stream) {
  if (heads <= 0 || k <= 0) return;
  const dim3 grid(static_cast<unsigned>((k + 255) / 256), static_cast<unsigned>(heads));
  GatherPerHeadKernel<<<grid, 256, 0, stream>>>(src, slots, dst, k, src_stride, dst_stride);
  KVSERVE_LAUNCH_CHECK();
}

}  // namespace kvserve::cuda
