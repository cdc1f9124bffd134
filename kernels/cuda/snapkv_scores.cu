// SnapKV window scores on the GPU, fp32 throughout. Pass 1 gives every (window query, head)
// row its softmax max and denominator per tile of keys, merged per row; pass 2 recomputes
// the logits and sums the normalized probabilities per key over all rows of a KV head, so
// only [tiles, rows] partials and [n_kv_heads, len] sums ever reach global memory. Then the
// average pool and the window slots' score (the max over all heads plus one).
#include <cfloat>
#include <cmath>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/smem_limit.h"

namespace kvserve::cuda {
namespace {

constexpr int kTile = 64;     // keys per block
constexpr int kRows = 16;     // (window query, head of the group) rows per step
constexpr int kThreads = 256; // thread t: key t % kTile, rows 4 * (t / kTile) .. + 3 of the step
constexpr int kMaxHeadDim = 256;

struct Layout {
  int64_t n_tiles, rows;  // tiles over len; rows = w * group per KV head
  float2* partial;        // [n_tiles, n_kv_heads, rows] (max, denominator) per tile
  float2* stats;          // [n_kv_heads, rows]
  float* attn;            // [n_kv_heads, len - w] summed probabilities
  unsigned* best;         // [1] the max pooled score, as float bits (scores are >= 0)
};

size_t Align(size_t b) { return (b + 255) / 256 * 256; }

Layout MakeLayout(void* scratch, int64_t len, int64_t w, int64_t n_kv_heads, int64_t n_heads) {
  Layout l;
  l.n_tiles = (len + kTile - 1) / kTile;
  l.rows = w * (n_heads / n_kv_heads);
  auto* p = static_cast<unsigned char*>(scratch);
  l.partial = reinterpret_cast<float2*>(p);
  p += Align(sizeof(float2) * l.n_tiles * n_kv_heads * l.rows);
  l.stats = reinterpret_cast<float2*>(p);
  p += Align(sizeof(float2) * n_kv_heads * l.rows);
  l.attn = reinterpret_cast<float*>(p);
  p += Align(sizeof(float) * n_kv_heads * (len - w));
  l.best = reinterpret_cast<unsigned*>(p);
  return l;
}

__device__ float2 MergeMaxSum(float2 a, float2 b) {
  const float m = fmaxf(a.x, b.x);
  if (m == -INFINITY) return make_float2(-INFINITY, 0.0f);
  return make_float2(m, a.y * expf(a.x - m) + b.y * expf(b.x - m));
}

// Pass 1 (kStats) or pass 2 over one tile of keys of KV head blockIdx.y.
template <bool kStats>
__global__ void __launch_bounds__(kThreads)
WindowPassKernel(const float* __restrict__ k_pages,  // [num_pages, page_size, n_kv_heads, head_dim]
                 const float* __restrict__ log_w,    // [num_pages, page_size, n_kv_heads]
                 const int32_t* __restrict__ pages,  // [ceil(len / page_size)]
                 const float* __restrict__ window,   // [w, n_heads, head_dim]
                 float2* __restrict__ partial,       // pass 1 out: [n_tiles, n_kv_heads, rows]
                 const float2* __restrict__ stats,   // pass 2 in: [n_kv_heads, rows]
                 float* __restrict__ attn,           // pass 2 out: [n_kv_heads, len - w]
                 int len, int w, int page_size, int n_kv_heads, int d, int n_heads, float scale) {
  extern __shared__ __align__(16) float smem[];
  float* ks = smem;                    // [kTile, d + 4]: +4 keeps float4 row reads conflict-free
  float* qs = ks + kTile * (d + 4);    // [kRows, d]
  float2* red = reinterpret_cast<float2*>(qs + kRows * d);  // [kRows, 2 warps]
  float* sums = qs + kRows * d;        // pass 2: [4, kTile] (aliases red)
  const int g = blockIdx.y, tile0 = blockIdx.x * kTile, t = threadIdx.x;
  const int group = n_heads / n_kv_heads, rows = w * group, m = len - w;
  const int sl = t % kTile, rl = t / kTile, s = tile0 + sl;

  const int d4 = d / 4;
  for (int idx = t; idx < kTile * d4; idx += kThreads) {
    const int r = idx / d4, e4 = idx % d4, ss = tile0 + r;
    float4 v = make_float4(0, 0, 0, 0);
    if (ss < len) {
      const int64_t off = (static_cast<int64_t>(pages[ss / page_size]) * page_size + ss % page_size) * n_kv_heads + g;
      v = reinterpret_cast<const float4*>(k_pages + off * d)[e4];
    }
    reinterpret_cast<float4*>(ks + r * (d + 4))[e4] = v;
  }
  float lw = 0.0f;
  if (s < len) lw = log_w[(static_cast<int64_t>(pages[s / page_size]) * page_size + s % page_size) * n_kv_heads + g];

  float prob_sum = 0.0f;  // pass 2: this thread's rows' probabilities of key s
  for (int r0 = 0; r0 < rows; r0 += kRows) {
    __syncthreads();
    for (int idx = t; idx < kRows * d4; idx += kThreads) {
      const int r = idx / d4, e4 = idx % d4, row = r0 + r;
      float4 v = make_float4(0, 0, 0, 0);
      if (row < rows) {
        const int i = row / group, h = g * group + row % group;
        v = reinterpret_cast<const float4*>(window + (static_cast<int64_t>(i) * n_heads + h) * d)[e4];
      }
      reinterpret_cast<float4*>(qs + r * d)[e4] = v;
    }
    __syncthreads();
    float acc[4] = {0, 0, 0, 0};
    const float* kp = ks + sl * (d + 4);
    for (int e = 0; e < d; e += 4) {
      const float4 kv = *reinterpret_cast<const float4*>(kp + e);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float4 qv = *reinterpret_cast<const float4*>(qs + (rl * 4 + j) * d + e);
        acc[j] += qv.x * kv.x + qv.y * kv.y + qv.z * kv.z + qv.w * kv.w;
      }
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int row = r0 + rl * 4 + j, i = row / group;
      // Window query i sits at slot m + i and sees slots [0, m + i].
      const bool valid = row < rows && s < len && s <= m + i;
      const float logit = acc[j] * scale + lw;
      if (kStats) {
        float mx = valid ? logit : -INFINITY;
        for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
        // A warp whose keys all have log-weight -inf has mx = -inf: exp(-inf - -inf) is NaN.
        float sum = valid && mx != -INFINITY ? expf(logit - mx) : 0.0f;
        for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
        if (t % 32 == 0) red[(rl * 4 + j) * 2 + (sl / 32)] = make_float2(mx, sum);
      } else if (valid && s < m) {
        const float2 st = stats[static_cast<int64_t>(g) * rows + row];
        if (st.y > 0.0f) prob_sum += expf(logit - st.x) / st.y;  // a row that sees no weight adds nothing
      }
    }
    if (kStats) {
      __syncthreads();
      if (t < kRows && r0 + t < rows) {
        partial[(static_cast<int64_t>(blockIdx.x) * n_kv_heads + g) * rows + r0 + t] =
            MergeMaxSum(red[t * 2], red[t * 2 + 1]);
      }
    }
  }
  if (!kStats) {
    __syncthreads();
    sums[rl * kTile + sl] = prob_sum;
    __syncthreads();
    if (t < kTile && s < m) {
      attn[static_cast<int64_t>(g) * m + s] = sums[t] + sums[kTile + t] + sums[2 * kTile + t] + sums[3 * kTile + t];
    }
  }
}

// One warp per (KV head, row): merges the row's per-tile partials.
__global__ void MergeStatsKernel(const float2* __restrict__ partial,  // [n_tiles, n_kv_heads, rows]
                                 float2* __restrict__ stats,          // [n_kv_heads, rows]
                                 int n_tiles, int n_kv_heads, int rows) {
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  if (warp >= n_kv_heads * rows) return;
  float2 acc = make_float2(-INFINITY, 0.0f);
  for (int tile = lane; tile < n_tiles; tile += 32) acc = MergeMaxSum(acc, partial[static_cast<int64_t>(tile) * n_kv_heads * rows + warp]);
  for (int o = 16; o > 0; o >>= 1) {
    const float2 other = make_float2(__shfl_xor_sync(0xffffffffu, acc.x, o), __shfl_xor_sync(0xffffffffu, acc.y, o));
    acc = MergeMaxSum(acc, other);
  }
  if (lane == 0) stats[warp] = acc;
}

// scores[g, s] for s < m: the zero-padded average pool of attn, divided by (w * group) to
// turn the sums into means over the window and the group; the max goes into *best.
__global__ void PoolKernel(const float* __restrict__ attn,  // [n_kv_heads, m]
                           float* __restrict__ scores,      // [n_kv_heads, len]
                           unsigned* __restrict__ best,     // [1]
                           int m, int len, int pool_kernel, float inv_rows) {
  const int g = blockIdx.y, s = blockIdx.x * blockDim.x + threadIdx.x;
  float v = 0.0f;
  if (s < m) {
    const int pad = pool_kernel / 2;
    const float* a = attn + static_cast<int64_t>(g) * m;
    float sum = 0.0f;
    for (int u = max(0, s - pad); u <= min(m - 1, s + pad); ++u) sum += a[u];
    v = sum / static_cast<float>(pool_kernel) * inv_rows;
    scores[static_cast<int64_t>(g) * len + s] = v;
  }
  // Non-negative floats order like their bit patterns, so an unsigned max is a float max.
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (threadIdx.x % 32 == 0) atomicMax(best, __float_as_uint(v));
}

__global__ void WindowSlotsKernel(float* __restrict__ scores,       // [n_kv_heads, len]
                                  const unsigned* __restrict__ best,  // [1]
                                  int m, int len) {
  const int g = blockIdx.y, s = m + blockIdx.x * blockDim.x + threadIdx.x;
  if (s < len) scores[static_cast<int64_t>(g) * len + s] = __uint_as_float(*best) + 1.0f;
}

size_t SharedBytes(int64_t d, bool stats) {
  const size_t q = sizeof(float) * (kTile * (d + 4) + kRows * d);
  return q + (stats ? sizeof(float2) * kRows * 2 : sizeof(float) * 4 * kTile);
}

}  // namespace

bool SnapKvScoresSupported(int64_t head_dim) { return head_dim > 0 && head_dim % 4 == 0 && head_dim <= kMaxHeadDim; }

size_t SnapKvScratchBytes(int64_t len, int64_t w, int64_t n_kv_heads, int64_t n_heads) {
  const int64_t n_tiles = (len + kTile - 1) / kTile, rows = w * (n_heads / n_kv_heads);
  return Align(sizeof(float2) * n_tiles * n_kv_heads * rows) + Align(sizeof(float2) * n_kv_heads * rows) +
         Align(sizeof(float) * n_kv_heads * (len - w)) + Align(sizeof(unsigned));
}

void SnapKvScores(const float* k_pages, const float* log_w, const int32_t* pages, const float* window, float* scores,
                  void* scratch, int64_t len, int64_t w, int64_t page_size, int64_t n_kv_heads, int64_t head_dim,
                  int64_t n_heads, float scale, int64_t pool_kernel, cudaStream_t stream) {
  if (len <= 0) return;
  const Layout l = MakeLayout(scratch, len, w, n_kv_heads, n_heads);
  const int m = static_cast<int>(len - w), kvh = static_cast<int>(n_kv_heads);
  // Up to ~84 KB of shared memory at head_dim 256: above the 48 KB default.
  AllowDynamicSharedMemory(WindowPassKernel<true>, SharedBytes(kMaxHeadDim, true));
  AllowDynamicSharedMemory(WindowPassKernel<false>, SharedBytes(kMaxHeadDim, false));
  KVSERVE_CUDA_CHECK(cudaMemsetAsync(l.best, 0, sizeof(unsigned), stream));
  if (m > 0) {
    const dim3 grid1(static_cast<unsigned>(l.n_tiles), static_cast<unsigned>(kvh));
    WindowPassKernel<true><<<grid1, kThreads, SharedBytes(head_dim, true), stream>>>(
        k_pages, log_w, pages, window, l.partial, nullptr, nullptr, static_cast<int>(len), static_cast<int>(w),
        static_cast<int>(page_size), kvh, static_cast<int>(head_dim), static_cast<int>(n_heads), scale);
    KVSERVE_LAUNCH_CHECK();
    const int64_t warps = n_kv_heads * l.rows;
    MergeStatsKernel<<<static_cast<unsigned>((warps * 32 + 255) / 256), 256, 0, stream>>>(
        l.partial, l.stats, static_cast<int>(l.n_tiles), kvh, static_cast<int>(l.rows));
    KVSERVE_LAUNCH_CHECK();
    // Pass 2 needs only the keys before the window.
    const dim3 grid2(static_cast<unsigned>((m + kTile - 1) / kTile), static_cast<unsigned>(kvh));
    WindowPassKernel<false><<<grid2, kThreads, SharedBytes(head_dim, false), stream>>>(
        k_pages, log_w, pages, window, nullptr, l.stats, l.attn, static_cast<int>(len), static_cast<int>(w),
        static_cast<int>(page_size), kvh, static_cast<int>(head_dim), static_cast<int>(n_heads), scale);
    KVSERVE_LAUNCH_CHECK();
    const dim3 grid3(static_cast<unsigned>((m + 255) / 256), static_cast<unsigned>(kvh));
    PoolKernel<<<grid3, 256, 0, stream>>>(l.attn, scores, l.best, m, static_cast<int>(len),
                                          static_cast<int>(pool_kernel), 1.0f / static_cast<float>(l.rows));
    KVSERVE_LAUNCH_CHECK();
  }
  const dim3 grid4(static_cast<unsigned>((w + 255) / 256), static_cast<unsigned>(kvh));
  WindowSlotsKernel<<<grid4, 256, 0, stream>>>(scores, l.best, m, static_cast<int>(len));
  KVSERVE_LAUNCH_CHECK();
}

}  // namespace kvserve::cuda
