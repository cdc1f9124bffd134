// Paged decode attention, flash-decoding style. A block takes one split (a key range of one
// decode token) for one KV head and serves every query head of that KV head's group, so each
// K/V entry is read once per group. Its 4 warps stride over the split 32 keys at a time:
// logits for 32 keys (one per lane), one online-softmax update per 32 keys, then the V pass.
// The warps' states are merged in the block, and a second kernel merges the splits of a token
// with their (max, sum) states. fp32 throughout, like the CPU reference.
#include <cfloat>

#include "kernels/attention_plan.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"

namespace kvserve::cuda {
namespace {

constexpr int kWarps = 4;
constexpr float kNegInf = -INFINITY;

template <int N>
__device__ inline void LoadVec(const float* p, float (&r)[N]) {
  if constexpr (N == 4) {
    const float4 x = *reinterpret_cast<const float4*>(p);
    r[0] = x.x, r[1] = x.y, r[2] = x.z, r[3] = x.w;
  } else if constexpr (N == 2) {
    const float2 x = *reinterpret_cast<const float2*>(p);
    r[0] = x.x, r[1] = x.y;
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) r[i] = p[i];
  }
}

__device__ inline float WarpSum(float x) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) x += __shfl_xor_sync(0xffffffffu, x, off);
  return x;
}

__device__ inline float WarpMax(float x) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, off));
  return x;
}

// HD: head_dim (a multiple of 32); G: the largest group this instance serves (group <= G).
template <int HD, int G>
__global__ void __launch_bounds__(kWarps * 32)
DecodeSplitKernel(DevicePagedKv kv,
                  const float* __restrict__ q,               // [n_tokens, n_heads, HD]
                  const DecodeSplit* __restrict__ splits,    // [n_splits]
                  float* __restrict__ part_o,                // [n_splits, n_heads, HD]
                  float* __restrict__ part_ml,               // [n_splits, n_heads, 2]
                  int group, float scale) {
  constexpr int E = HD / 32;  // elements of a row per lane
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = blockIdx.y;
  const int n_kv = kv.n_kv_heads, n_heads = n_kv * group;
  const DecodeSplit sp = splits[blockIdx.x];
  const int32_t* pages = kv.page_indices + kv.page_indptr[sp.seq];
  const int64_t row = static_cast<int64_t>(n_kv) * HD;

  float qr[G][E];
#pragma unroll
  for (int h = 0; h < G; ++h) {
    if (h < group) {
      LoadVec<E>(q + (static_cast<int64_t>(sp.token) * n_heads + g * group + h) * HD + lane * E, qr[h]);
#pragma unroll
      for (int e = 0; e < E; ++e) qr[h][e] *= scale;
    }
  }
  float m[G], l[G], acc[G][E];
#pragma unroll
  for (int h = 0; h < G; ++h) {
    m[h] = kNegInf;
    l[h] = 0.0f;
#pragma unroll
    for (int e = 0; e < E; ++e) acc[h][e] = 0.0f;
  }

  for (int c = sp.kv_begin + warp * 32; c < sp.kv_end; c += kWarps * 32) {
    const int n_keys = min(32, sp.kv_end - c);
    // Each lane resolves the slot of "its" key once; the warp reads it with a shuffle.
    int64_t my_slot = 0;
    if (lane < n_keys) {
      const int j = c + lane;
      my_slot = static_cast<int64_t>(pages[j / kv.page_size]) * kv.page_size + j % kv.page_size;
    }
    float my_logit[G];
#pragma unroll
    for (int h = 0; h < G; ++h) my_logit[h] = kNegInf;
    // Logits: lane kk ends up holding key c + kk's logit for every head of the group.
#pragma unroll 4
    for (int kk = 0; kk < n_keys; ++kk) {
      const int64_t slot = __shfl_sync(0xffffffffu, my_slot, kk);
      float kr[E];
      LoadVec<E>(kv.k + slot * row + g * HD + lane * E, kr);
      const float lw = kv.log_w[slot * n_kv + g];
#pragma unroll
      for (int h = 0; h < G; ++h) {
        if (h < group) {
          float d = 0.0f;
#pragma unroll
          for (int e = 0; e < E; ++e) d = fmaf(qr[h][e], kr[e], d);
          d = WarpSum(d) + lw;
          if (lane == kk) my_logit[h] = d;
        }
      }
    }
    // One online-softmax update per 32 keys.
    float my_p[G];
#pragma unroll
    for (int h = 0; h < G; ++h) {
      my_p[h] = 0.0f;
      if (h < group) {
        const float new_m = fmaxf(m[h], WarpMax(my_logit[h]));
        if (new_m != kNegInf) {  // all -inf so far: nothing weighted yet, keep the empty state
          const float alpha = __expf(m[h] - new_m);  // m = -inf gives 0
          my_p[h] = __expf(my_logit[h] - new_m);
          l[h] = l[h] * alpha + WarpSum(my_p[h]);
#pragma unroll
          for (int e = 0; e < E; ++e) acc[h][e] *= alpha;
          m[h] = new_m;
        }
      }
    }
#pragma unroll 4
    for (int kk = 0; kk < n_keys; ++kk) {
      const int64_t slot = __shfl_sync(0xffffffffu, my_slot, kk);
      float vr[E];
      LoadVec<E>(kv.v + slot * row + g * HD + lane * E, vr);
#pragma unroll
      for (int h = 0; h < G; ++h) {
        if (h < group) {
          const float p = __shfl_sync(0xffffffffu, my_p[h], kk);
#pragma unroll
          for (int e = 0; e < E; ++e) acc[h][e] = fmaf(p, vr[e], acc[h][e]);
        }
      }
    }
  }

  // Merge the warps' states: shared [warp][head] (m, l) and [warp][head][HD] accumulators.
  __shared__ float s_m[kWarps][G], s_l[kWarps][G];
  __shared__ float s_acc[kWarps][G][HD];
#pragma unroll
  for (int h = 0; h < G; ++h) {
    if (lane == 0) {
      s_m[warp][h] = m[h];
      s_l[warp][h] = l[h];
    }
#pragma unroll
    for (int e = 0; e < E; ++e) s_acc[warp][h][lane * E + e] = acc[h][e];
  }
  __syncthreads();
  const int64_t base = static_cast<int64_t>(blockIdx.x) * n_heads + g * group;  // (split, first head)
  for (int i = threadIdx.x; i < group * HD; i += blockDim.x) {
    const int h = i / HD, d = i % HD;
    float mx = kNegInf;
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, s_m[w][h]);
    float o = 0.0f, sum = 0.0f;
    if (mx != kNegInf) {
      for (int w = 0; w < kWarps; ++w) {
        const float f = __expf(s_m[w][h] - mx);
        o += f * s_acc[w][h][d];
        sum += f * s_l[w][h];
      }
    }
    part_o[(base + h) * HD + d] = o;
    if (d == 0) {
      part_ml[(base + h) * 2] = mx;
      part_ml[(base + h) * 2 + 1] = sum;
    }
  }
}

// out[token, head] = sum_s e^(m_s - M) o_s / sum_s e^(m_s - M) l_s over the token's splits.
__global__ void MergeSplitsKernel(const float* __restrict__ part_o,      // [n_splits, n_heads, head_dim]
                                  const float* __restrict__ part_ml,     // [n_splits, n_heads, 2]
                                  const DecodeMerge* __restrict__ merges,  // [n_merges]
                                  float* __restrict__ out,               // [n_tokens, n_heads, head_dim]
                                  int n_heads, int head_dim) {
  const DecodeMerge mg = merges[blockIdx.x];
  const int h = blockIdx.y;
  float mx = kNegInf;
  for (int s = mg.split_begin; s < mg.split_end; ++s) mx = fmaxf(mx, part_ml[(static_cast<int64_t>(s) * n_heads + h) * 2]);
  float sum = 0.0f;
  if (mx != kNegInf) {
    for (int s = mg.split_begin; s < mg.split_end; ++s) {
      const int64_t i = static_cast<int64_t>(s) * n_heads + h;
      sum += __expf(part_ml[i * 2] - mx) * part_ml[i * 2 + 1];
    }
  }
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;  // no weighted entry at all: zeros, as the CPU
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float o = 0.0f;
    if (mx != kNegInf) {
      for (int s = mg.split_begin; s < mg.split_end; ++s) {
        const int64_t i = static_cast<int64_t>(s) * n_heads + h;
        o += __expf(part_ml[i * 2] - mx) * part_o[i * head_dim + d];
      }
    }
    out[(static_cast<int64_t>(mg.token) * n_heads + h) * head_dim + d] = o * inv;
  }
}

template <int HD, int G>
void LaunchSplits(const DevicePagedKv& kv, const float* q, const DecodeSplit* splits, float* part_o,
                  float* part_ml, int64_t n_splits, int group, float scale, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(n_splits), static_cast<unsigned>(kv.n_kv_heads));
  DecodeSplitKernel<HD, G><<<grid, kWarps * 32, 0, stream>>>(kv, q, splits, part_o, part_ml, group, scale);
  KVSERVE_LAUNCH_CHECK();
}

template <int HD>
void LaunchForGroup(const DevicePagedKv& kv, const float* q, const DecodeSplit* splits, float* part_o,
                    float* part_ml, int64_t n_splits, int group, float scale, cudaStream_t stream) {
  if (group <= 1) return LaunchSplits<HD, 1>(kv, q, splits, part_o, part_ml, n_splits, group, scale, stream);
  if (group <= 2) return LaunchSplits<HD, 2>(kv, q, splits, part_o, part_ml, n_splits, group, scale, stream);
  if (group <= 4) return LaunchSplits<HD, 4>(kv, q, splits, part_o, part_ml, n_splits, group, scale, stream);
  return LaunchSplits<HD, 8>(kv, q, splits, part_o, part_ml, n_splits, group, scale, stream);
}

}  // namespace

bool DecodeAttentionSupported(int64_t head_dim, int64_t group) {
  return (head_dim == 64 || head_dim == 128) && group >= 1 && group <= 8;
}

void DecodeAttention(const DevicePagedKv& kv, const float* q, const DecodeSplit* splits, const DecodeMerge* merges,
                     float* part_o, float* part_ml, float* out, int64_t n_splits, int64_t n_merges, int64_t n_heads,
                     float scale, cudaStream_t stream) {
  if (n_splits <= 0) return;
  const int group = static_cast<int>(n_heads / kv.n_kv_heads);
  if (kv.head_dim == 64) {
    LaunchForGroup<64>(kv, q, splits, part_o, part_ml, n_splits, group, scale, stream);
  } else {
    LaunchForGroup<128>(kv, q, splits, part_o, part_ml, n_splits, group, scale, stream);
  }
  const dim3 grid(static_cast<unsigned>(n_merges), static_cast<unsigned>(n_heads));
  MergeSplitsKernel<<<grid, kv.head_dim, 0, stream>>>(part_o, part_ml, merges, out, static_cast<int>(n_heads),
                                                      kv.head_dim);
  KVSERVE_LAUNCH_CHECK();
}

}  // namespace kvserve::cuda
