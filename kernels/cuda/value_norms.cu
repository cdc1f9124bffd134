// CriticalKV on the GPU: the projected value norms N[g, s] = mean over the query heads h of
// KV head g of ||v_s W_O^h||_1, and the two-stage merge with the base score.
// Tensor-core path (head_dim 64 or 128, hidden % 16 == 0): a block holds 256 slots of v as
// bf16 in shared memory (each warp keeps its 32 rows as wmma A fragments in registers), streams
// W_O^h through shared memory 64 output columns at a time, and folds |.| of every 16x16 fp32
// accumulator tile into per-row sums as soon as it is produced: the [n, hidden] product is
// never written. bf16 inputs put N within ~1e-2 relative of the fp32 reference. Other shapes
// use a plain fp32 kernel.
#include <cuda_bf16.h>
#include <mma.h>

#include <cfloat>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/smem_limit.h"

namespace kvserve::cuda {
namespace {

using namespace nvcuda;

constexpr int kWarps = 8;
constexpr int kRowTiles = 2;                         // 16-slot row tiles per warp
constexpr int kBlockSlots = kWarps * kRowTiles * 16;  // 256
constexpr int kOChunk = 64;                          // W_O columns staged per step

template <int D>
constexpr int kPad = D + 8;  // bf16 row pitch: keeps wmma pointers 32-byte aligned, spreads banks

template <int D>
size_t WmmaSharedBytes() {
  return sizeof(__nv_bfloat16) * (kBlockSlots + kOChunk) * kPad<D> + sizeof(float) * kWarps * kRowTiles * 256;
}

__device__ int64_t SlotRow(const int32_t* pages, int64_t s, int page_size, int n_kv_heads, int g) {
  return (static_cast<int64_t>(pages[s / page_size]) * page_size + s % page_size) * n_kv_heads + g;
}

template <int D>
__global__ void __launch_bounds__(kWarps * 32)
NormsWmmaKernel(const float* __restrict__ v_pages,         // [num_pages, page_size, n_kv_heads, D]
                const int32_t* __restrict__ pages,         // [ceil(len / page_size)]
                const __nv_bfloat16* __restrict__ wo,      // [hidden, n_heads * D]
                float* __restrict__ norms,                 // [n_kv_heads, stride]
                int first, int len, int page_size, int n_kv_heads, int n_heads, int hidden, int stride) {
  extern __shared__ __align__(128) unsigned char smem[];
  auto* vs = reinterpret_cast<__nv_bfloat16*>(smem);  // [kBlockSlots, kPad]: A, row-major
  __nv_bfloat16* ws = vs + kBlockSlots * kPad<D>;      // [kOChunk, kPad]: B(e, o) at ws[o * kPad + e]
  auto* cs = reinterpret_cast<float*>(ws + kOChunk * kPad<D>);  // [kWarps, kRowTiles, 16, 16]
  const int g = blockIdx.y, t = threadIdx.x, warp = t / 32, lane = t % 32;
  const int s0 = first + blockIdx.x * kBlockSlots, group = n_heads / n_kv_heads, qd = n_heads * D;

  for (int idx = t; idx < kBlockSlots * D; idx += kWarps * 32) {
    const int r = idx / D, e = idx % D, s = s0 + r;
    const float v = s < len ? v_pages[SlotRow(pages, s, page_size, n_kv_heads, g) * D + e] : 0.0f;
    vs[r * kPad<D> + e] = __float2bfloat16(v);
  }
  __syncthreads();
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a[kRowTiles][D / 16];
#pragma unroll
  for (int rt = 0; rt < kRowTiles; ++rt) {
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      wmma::load_matrix_sync(a[rt][kk], vs + ((warp * kRowTiles + rt) * 16) * kPad<D> + kk * 16, kPad<D>);
    }
  }
  float* my_c = cs + warp * kRowTiles * 256;
  float row_l1 = 0.0f;  // lane l: row l % 16 of row tile l / 16
  for (int hh = 0; hh < group; ++hh) {
    const __nv_bfloat16* w_head = wo + static_cast<int64_t>(g * group + hh) * D;
    for (int o0 = 0; o0 < hidden; o0 += kOChunk) {
      __syncthreads();  // every warp is done with the previous chunk
      for (int idx = t; idx < kOChunk * D; idx += kWarps * 32) {
        const int ol = idx / D, e = idx % D, o = o0 + ol;
        ws[ol * kPad<D> + e] = o < hidden ? w_head[static_cast<int64_t>(o) * qd + e] : __float2bfloat16(0.0f);
      }
      __syncthreads();
#pragma unroll
      for (int ot = 0; ot < kOChunk / 16; ++ot) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> c[kRowTiles];
#pragma unroll
        for (int rt = 0; rt < kRowTiles; ++rt) wmma::fill_fragment(c[rt], 0.0f);
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b;
          wmma::load_matrix_sync(b, ws + (ot * 16) * kPad<D> + kk * 16, kPad<D>);
#pragma unroll
          for (int rt = 0; rt < kRowTiles; ++rt) wmma::mma_sync(c[rt], a[rt][kk], b, c[rt]);
        }
        // The fragment's element-to-lane map is unspecified, so the tile goes through a
        // 1 KB per-warp staging area to be summed by rows.
#pragma unroll
        for (int rt = 0; rt < kRowTiles; ++rt) wmma::store_matrix_sync(my_c + rt * 256, c[rt], 16, wmma::mem_row_major);
        __syncwarp();
        const float* row = my_c + (lane / 16) * 256 + (lane % 16) * 16;
#pragma unroll
        for (int j = 0; j < 16; ++j) row_l1 += fabsf(row[j]);
        __syncwarp();
      }
    }
  }
  const int s = s0 + (warp * kRowTiles + lane / 16) * 16 + lane % 16;
  if (s < len) norms[static_cast<int64_t>(g) * stride + s] = row_l1 / static_cast<float>(group);
}

// Any shape, fp32 on CUDA cores: one block per (slot, KV head), threads over output columns.
__global__ void NormsFp32Kernel(const float* __restrict__ v_pages,     // [num_pages, page_size, n_kv_heads, d]
                                const int32_t* __restrict__ pages,     // [ceil(len / page_size)]
                                const __nv_bfloat16* __restrict__ wo,  // [hidden, n_heads * d]
                                float* __restrict__ norms,             // [n_kv_heads, stride]
                                int first, int page_size, int n_kv_heads, int d, int n_heads, int hidden,
                                int stride) {
  extern __shared__ float v[];  // [d]
  __shared__ float warp_sums[32];
  const int s = first + blockIdx.x, g = blockIdx.y, group = n_heads / n_kv_heads, qd = n_heads * d;
  const float* src = v_pages + SlotRow(pages, s, page_size, n_kv_heads, g) * d;
  for (int e = threadIdx.x; e < d; e += blockDim.x) v[e] = src[e];
  __syncthreads();
  float l1 = 0.0f;
  for (int hh = 0; hh < group; ++hh) {
    const __nv_bfloat16* w_head = wo + static_cast<int64_t>(g * group + hh) * d;
    for (int o = threadIdx.x; o < hidden; o += blockDim.x) {
      float acc = 0.0f;
      for (int e = 0; e < d; ++e) acc += v[e] * __bfloat162float(w_head[static_cast<int64_t>(o) * qd + e]);
      l1 += fabsf(acc);
    }
  }
  for (int o = 16; o > 0; o >>= 1) l1 += __shfl_xor_sync(0xffffffffu, l1, o);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = l1;
  __syncthreads();
  if (threadIdx.x == 0) {
    float sum = 0.0f;
    for (int i = 0; i < static_cast<int>(blockDim.x / 32); ++i) sum += warp_sums[i];
    norms[static_cast<int64_t>(g) * stride + s] = sum / static_cast<float>(group);
  }
}

template <int D>
void LaunchWmma(const float* v_pages, const int32_t* pages, const __nv_bfloat16* wo, float* norms, int64_t first,
                int64_t len, int64_t page_size, int64_t n_kv_heads, int64_t n_heads, int64_t hidden, int64_t stride,
                cudaStream_t stream) {
  // ~103 KB at D = 128: above the 48 KB default, within sm_80's 163 KB.
  AllowDynamicSharedMemory(NormsWmmaKernel<D>, WmmaSharedBytes<D>());
  const dim3 grid(static_cast<unsigned>((len - first + kBlockSlots - 1) / kBlockSlots), static_cast<unsigned>(n_kv_heads));
  NormsWmmaKernel<D><<<grid, kWarps * 32, WmmaSharedBytes<D>(), stream>>>(
      v_pages, pages, wo, norms, static_cast<int>(first), static_cast<int>(len), static_cast<int>(page_size),
      static_cast<int>(n_kv_heads), static_cast<int>(n_heads), static_cast<int>(hidden), static_cast<int>(stride));
  KVSERVE_LAUNCH_CHECK();
}

__global__ void CriticalKvMergeKernel(const float* __restrict__ base,   // [heads, len]
                                      const float* __restrict__ norms,  // [heads, norms_stride]
                                      float* __restrict__ merged,       // [heads, len]
                                      int64_t len, int64_t norms_stride, float eps) {
  const int64_t h = blockIdx.y, s = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (s < len) merged[h * len + s] = (base[h * len + s] + eps) * norms[h * norms_stride + s];
}

// Stage 1 winners outrank every stage-2 score.
__global__ void StageOneKernel(const int32_t* __restrict__ first_slots,  // [heads, n_first]
                               float* __restrict__ merged,                // [heads, len]
                               int64_t len, int64_t n_first) {
  const int64_t h = blockIdx.y, i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n_first) merged[h * len + first_slots[h * n_first + i]] = FLT_MAX;
}

}  // namespace

void ProjectedValueNorms(const float* v_pages, const int32_t* pages, const __nv_bfloat16* wo, float* norms,
                         int64_t first, int64_t len, int64_t page_size, int64_t n_kv_heads, int64_t head_dim,
                         int64_t n_heads, int64_t hidden, int64_t stride, cudaStream_t stream) {
  if (len <= first) return;
  if (hidden % 16 == 0 && head_dim == 128) {
    LaunchWmma<128>(v_pages, pages, wo, norms, first, len, page_size, n_kv_heads, n_heads, hidden, stride, stream);
  } else if (hidden % 16 == 0 && head_dim == 64) {
    LaunchWmma<64>(v_pages, pages, wo, norms, first, len, page_size, n_kv_heads, n_heads, hidden, stride, stream);
  } else {
    const dim3 grid(static_cast<unsigned>(len - first), static_cast<unsigned>(n_kv_heads));
    NormsFp32Kernel<<<grid, 256, sizeof(float) * head_dim, stream>>>(
        v_pages, pages, wo, norms, static_cast<int>(first), static_cast<int>(page_size), static_cast<int>(n_kv_heads),
        static_cast<int>(head_dim), static_cast<int>(n_heads), static_cast<int>(hidden), static_cast<int>(stride));
    KVSERVE_LAUNCH_CHECK();
  }
}

void CriticalKvMerge(const float* base, const float* norms, const int32_t* first_slots, float* merged, int64_t heads,
                     int64_t len, int64_t norms_stride, int64_t n_first, float eps, cudaStream_t stream) {
  if (len <= 0 || heads <= 0) return;
  const dim3 grid(static_cast<unsigned>((len + 255) / 256), static_cast<unsigned>(heads));
  CriticalKvMergeKernel<<<grid, 256, 0, stream>>>(base, norms, merged, len, norms_stride, eps);
  KVSERVE_LAUNCH_CHECK();
  if (n_first <= 0) return;
  const dim3 grid1(static_cast<unsigned>((n_first + 255) / 256), static_cast<unsigned>(heads));
  StageOneKernel<<<grid1, 256, 0, stream>>>(first_slots, merged, len, n_first);
  KVSERVE_LAUNCH_CHECK();
}

}  // namespace kvserve::cuda
