// The evicted entries' weight merged into the kept ones, on the GPU (the definition:
// MergeEvictedWeights in kernels/cpu/kv_compress_ops.h). Four steps per layer: each slot's
// kept index (-1 when evicted), each head's largest finite log-weight, then a thread per slot
// finds its nearest kept key (the kept keys pass through shared memory in tiles) and adds its
// shifted weight to that entry's sum in double, then the sums become log-weights. The double
// sums make the order of the atomic additions invisible at float precision. When values merge
// too, the nearest-key step leaves each slot's target in kept_index, a block per slot adds its
// weighted value to its target's sums, and each kept entry's V becomes sums / weight.
#include <algorithm>
#include <cmath>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"

namespace kvserve::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kTile = 32;  // kept keys per shared-memory tile: 32 * head_dim floats

__device__ int64_t Row(const int32_t* pages, int64_t s, int64_t page_size, int64_t n_kv_heads, int64_t h) {
  return (static_cast<int64_t>(pages[s / page_size]) * page_size + s % page_size) * n_kv_heads + h;
}

__global__ void MarkKeptKernel(const int32_t* __restrict__ slots,  // [n_kv_heads, k]
                               int32_t* __restrict__ kept_index,   // [n_kv_heads, len], -1 beforehand
                               int64_t k, int64_t len) {
  const int64_t h = blockIdx.y, i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < k) kept_index[h * len + slots[h * k + i]] = static_cast<int32_t>(i);
}

// Block h: the largest finite log-weight of head h (-inf when none).
__global__ void HeadMaxKernel(const float* __restrict__ log_w, const int32_t* __restrict__ pages,
                              float* __restrict__ head_max, int64_t len, int64_t page_size, int64_t n_kv_heads) {
  __shared__ float part[kThreads];
  const int64_t h = blockIdx.x;
  float m = -INFINITY;
  for (int64_t s = threadIdx.x; s < len; s += blockDim.x) {
    const float lw = log_w[Row(pages, s, page_size, n_kv_heads, h)];
    if (isfinite(lw)) m = fmaxf(m, lw);
  }
  part[threadIdx.x] = m;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) part[threadIdx.x] = fmaxf(part[threadIdx.x], part[threadIdx.x + stride]);
    __syncthreads();
  }
  if (threadIdx.x == 0) head_max[h] = part[0];
}

// Thread: slot s of head blockIdx.y; its weight goes to its own kept index or, when evicted,
// to the kept entry with the nearest key (ties to the lower index). kept_index[h, s] is left
// holding that target (-1: the slot carries nothing), which only this thread reads.
__global__ void NearestKeptKernel(const float* __restrict__ k_pages,     // [num_pages, page_size, n_kv_heads, head_dim]
                                  const float* __restrict__ log_w,       // [num_pages, page_size, n_kv_heads]
                                  const int32_t* __restrict__ pages,     // [ceil(len / page_size)]
                                  const int32_t* __restrict__ slots,     // [n_kv_heads, k]
                                  int32_t* __restrict__ kept_index,      // [n_kv_heads, len]
                                  const float* __restrict__ head_max,    // [n_kv_heads]
                                  double* __restrict__ mass,             // [n_kv_heads, k], zero beforehand
                                  int64_t len, int64_t k, float radius_sq, int64_t page_size, int64_t n_kv_heads,
                                  int64_t head_dim) {
  extern __shared__ float tile[];  // [kTile, head_dim]
  const int64_t h = blockIdx.y, s = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool live = s < len;
  const int64_t row = live ? Row(pages, s, page_size, n_kv_heads, h) : 0;
  const float lw = live ? log_w[row] : -INFINITY;
  int64_t to = live ? kept_index[h * len + s] : 0;
  // Every thread of the block takes part in the tile loads, so the loop runs for all.
  const bool search = live && isfinite(lw) && to < 0;
  const float* key = k_pages + row * head_dim;
  float best = INFINITY;
  for (int64_t i0 = 0; i0 < k; i0 += kTile) {
    const int64_t n = min(static_cast<int64_t>(kTile), k - i0);
    __syncthreads();
    for (int64_t idx = threadIdx.x; idx < n * head_dim; idx += blockDim.x) {
      const int64_t i = idx / head_dim, e = idx % head_dim;
      tile[idx] = k_pages[Row(pages, slots[h * k + i0 + i], page_size, n_kv_heads, h) * head_dim + e];
    }
    __syncthreads();
    if (!search) continue;
    for (int64_t i = 0; i < n; ++i) {
      float dist = 0;
      for (int64_t e = 0; e < head_dim; ++e) {
        const float diff = key[e] - tile[i * head_dim + e];
        dist = fmaf(diff, diff, dist);
      }
      if (dist < best) {
        best = dist;
        to = i0 + i;
      }
    }
  }
  if (search && to >= 0) {
    // Merged only into a kept key within radius times its own norm; else dropped.
    float key_sq = 0;
    for (int64_t e = 0; e < head_dim; ++e) key_sq = fmaf(key[e], key[e], key_sq);
    if (best / fmaxf(key_sq, 1e-20f) > radius_sq) to = -1;
  }
  const bool carries = live && isfinite(lw) && to >= 0;
  if (carries) atomicAdd(&mass[h * k + to], exp(static_cast<double>(lw) - static_cast<double>(head_max[h])));
  if (live) kept_index[h * len + s] = carries ? static_cast<int32_t>(to) : -1;
}

// Block (s, h): slot s's value, times its shifted weight, added to its target's sums.
__global__ void ValueSumsKernel(const float* __restrict__ v_pages, const float* __restrict__ log_w,
                                const int32_t* __restrict__ pages, const int32_t* __restrict__ target,  // [n_kv_heads, len]
                                const float* __restrict__ head_max, double* __restrict__ sums,  // [n_kv_heads, k, head_dim]
                                int64_t len, int64_t k, int64_t page_size, int64_t n_kv_heads, int64_t head_dim) {
  const int64_t s = blockIdx.x, h = blockIdx.y;
  const int32_t to = target[h * len + s];
  if (to < 0) return;
  const int64_t row = Row(pages, s, page_size, n_kv_heads, h);
  const double w = exp(static_cast<double>(log_w[row]) - static_cast<double>(head_max[h]));
  for (int64_t e = threadIdx.x; e < head_dim; e += blockDim.x) {
    atomicAdd(&sums[(h * k + to) * head_dim + e], w * static_cast<double>(v_pages[row * head_dim + e]));
  }
}

// Block (i, h): kept entry i's V = its sums / its weight; an entry of weight 0 keeps its V.
__global__ void MeanValuesKernel(float* __restrict__ v_pages, const int32_t* __restrict__ pages,
                                 const int32_t* __restrict__ slots, const double* __restrict__ mass,
                                 const double* __restrict__ sums, int64_t k, int64_t page_size, int64_t n_kv_heads,
                                 int64_t head_dim) {
  const int64_t i = blockIdx.x, h = blockIdx.y;
  const double m = mass[h * k + i];
  if (!(m > 0)) return;
  const int64_t row = Row(pages, slots[h * k + i], page_size, n_kv_heads, h);
  for (int64_t e = threadIdx.x; e < head_dim; e += blockDim.x) {
    v_pages[row * head_dim + e] = static_cast<float>(sums[(h * k + i) * head_dim + e] / m);
  }
}

__global__ void LogSumsKernel(const double* __restrict__ mass, const float* __restrict__ head_max,
                              float* __restrict__ out_log_w, int64_t k) {
  const int64_t h = blockIdx.y, i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= k) return;
  const double m = mass[h * k + i];
  out_log_w[h * k + i] = m > 0 ? static_cast<float>(log(m) + static_cast<double>(head_max[h])) : -INFINITY;
}

}  // namespace

// Layout: mass [n_kv_heads, k] and the value sums [n_kv_heads, k, value_dim] (doubles first,
// for their alignment), kept_index [n_kv_heads, len], head_max [n_kv_heads].
size_t MergeEvictedWeightsScratchBytes(int64_t len, int64_t k, int64_t n_kv_heads, int64_t value_dim) {
  return sizeof(double) * static_cast<size_t>(n_kv_heads * k * (1 + value_dim)) +
         sizeof(int32_t) * static_cast<size_t>(n_kv_heads * len) + sizeof(float) * static_cast<size_t>(n_kv_heads);
}

bool MergeEvictedWeightsSupported(int64_t head_dim) {
  return head_dim >= 1 && sizeof(float) * kTile * head_dim <= 48 * 1024;
}

void MergeEvictedWeights(const float* k_pages, float* v_pages, const float* log_w, const int32_t* pages,
                         const int32_t* slots, float* out_log_w, void* scratch, int64_t len, int64_t k, float radius,
                         int64_t page_size, int64_t n_kv_heads, int64_t head_dim, cudaStream_t stream) {
  if (k <= 0 || len <= 0) return;
  const int64_t value_dim = v_pages ? head_dim : 0;
  auto* mass = static_cast<double*>(scratch);
  double* sums = mass + n_kv_heads * k;
  auto* kept_index = reinterpret_cast<int32_t*>(sums + n_kv_heads * k * value_dim);
  auto* head_max = reinterpret_cast<float*>(kept_index + n_kv_heads * len);
  KVSERVE_CUDA_CHECK(cudaMemsetAsync(mass, 0, sizeof(double) * n_kv_heads * k * (1 + value_dim), stream));
  KVSERVE_CUDA_CHECK(cudaMemsetAsync(kept_index, 0xff, sizeof(int32_t) * n_kv_heads * len, stream));
  const dim3 kept_grid(static_cast<unsigned>((k + kThreads - 1) / kThreads), static_cast<unsigned>(n_kv_heads));
  MarkKeptKernel<<<kept_grid, kThreads, 0, stream>>>(slots, kept_index, k, len);
  KVSERVE_CUDA_CHECK(cudaGetLastError());
  HeadMaxKernel<<<static_cast<unsigned>(n_kv_heads), kThreads, 0, stream>>>(log_w, pages, head_max, len, page_size,
                                                                            n_kv_heads);
  KVSERVE_CUDA_CHECK(cudaGetLastError());
  const dim3 slot_grid(static_cast<unsigned>((len + kThreads - 1) / kThreads), static_cast<unsigned>(n_kv_heads));
  NearestKeptKernel<<<slot_grid, kThreads, sizeof(float) * kTile * head_dim, stream>>>(
      k_pages, log_w, pages, slots, kept_index, head_max, mass, len, k, radius * radius, page_size, n_kv_heads,
      head_dim);
  KVSERVE_CUDA_CHECK(cudaGetLastError());
  LogSumsKernel<<<kept_grid, kThreads, 0, stream>>>(mass, head_max, out_log_w, k);
  KVSERVE_CUDA_CHECK(cudaGetLastError());
  if (!v_pages) return;
  const unsigned value_threads = static_cast<unsigned>(std::min<int64_t>(head_dim, kThreads));
  ValueSumsKernel<<<dim3(static_cast<unsigned>(len), static_cast<unsigned>(n_kv_heads)), value_threads, 0, stream>>>(
      v_pages, log_w, pages, kept_index, head_max, sums, len, k, page_size, n_kv_heads, head_dim);
  KVSERVE_CUDA_CHECK(cudaGetLastError());
  // Every sum is complete before any V is written: a kept entry's own value is among them.
  MeanValuesKernel<<<dim3(static_cast<unsigned>(k), static_cast<unsigned>(n_kv_heads)), value_threads, 0, stream>>>(
      v_pages, pages, slots, mass, sums, k, page_size, n_kv_heads, head_dim);
  KVSERVE_CUDA_CHECK(cudaGetLastError());
}

}  // namespace kvserve::cuda
