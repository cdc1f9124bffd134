// Top-k sampling's candidates on the device: the k best logits of each row and their ids, in
// cpu::RowTopK's order (value descending, equal values by lower id, NaN as -inf), so only
// rows * k * 8 bytes cross to the host instead of the whole row, and the host finishes the
// draw (Sampler::SampleFromTopK).
//
// Design: one 1024-thread block per row runs an exact MSB-first radix select, then compacts
// and ranks the k winners. Each element gets a unique 64-bit key, smaller = better: the
// value's bits, ordered descending, above the id. Each pass histograms one 8-bit digit of the
// keys that share the prefix chosen so far (shared-memory bins, warp-aggregated atomics) and
// picks the digit holding the k-th best key; it stops as soon as that digit's whole bucket
// is in, which for distinct values is after the 4 value digits, and only ties at the k-th
// value go on into the id digits. The selection is then one comparison per element, the
// winners land in shared memory in any order (atomics), and each is placed by counting the
// winners with a smaller key, which is deterministic because keys are unique.
// Why this and not a sort: a 128256-wide row is 500 KB, and every pass is one streaming read
// of it (from L2 after the first), with no global scratch and one launch for all rows; a
// segmented or device-wide radix sort would sort every element, 4M pairs at batch 32, to
// keep 40 of each row. Ranking k <= 1024 winners by counting costs k shared reads per
// thread, less than a 13-pass CUB block radix sort at the usual k of 20-100.
// One row per block keeps rows independent (rows <= 64 fit one wave on an H100/H200); at
// batch 1 that leaves the other SMs idle, the first thing to split if the bench says so.
#include <algorithm>
#include <cub/block/block_scan.cuh>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"

namespace kvserve::cuda {
namespace {

constexpr int kThreads = 1024;  // also the most candidates: one per thread when ranking
static_assert(kTopKRowsMaxK <= kThreads, "the ranking gives each thread at most one winner");
constexpr int kUnroll = 8;      // loads in flight per thread, so one SM keeps ~32 KB in flight
constexpr int kBins = 256;      // 8-bit digits

// Unique, smaller is better: ~(value bits in ascending float order) << 32 | id. NaN counts as
// -inf; -0.0 as +0.0 (operator== ties them on the CPU, so the lower id must win here too).
__device__ inline unsigned long long Key(float f, int64_t id) {
  if (f != f) f = -__int_as_float(0x7f800000);
  const unsigned x = f == 0.0f ? 0u : __float_as_uint(f);
  const unsigned ascending = (x & 0x80000000u) ? ~x : (x | 0x80000000u);
  return (static_cast<unsigned long long>(~ascending) << 32) | static_cast<unsigned long long>(id);
}

__device__ inline float KeyValue(unsigned long long key) {
  const unsigned ascending = ~static_cast<unsigned>(key >> 32);
  return __uint_as_float((ascending & 0x80000000u) ? (ascending & 0x7fffffffu) : ~ascending);
}

// Calls f(valid, key) for every element of the row, with every thread of the block in each
// call (valid false past the end), so f may use warp collectives.
template <typename F>
__device__ inline void ForEachKey(const float* __restrict__ row, int64_t vocab, F&& f) {
  for (int64_t base = 0; base < vocab; base += int64_t{kThreads} * kUnroll) {
    float v[kUnroll];
#pragma unroll
    for (int j = 0; j < kUnroll; ++j) {
      const int64_t i = base + j * kThreads + threadIdx.x;
      v[j] = i < vocab ? __ldg(row + i) : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < kUnroll; ++j) {
      const int64_t i = base + j * kThreads + threadIdx.x;
      f(i < vocab, Key(v[j], i));
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    RowTopKKernel(const float* __restrict__ logits,  // [rows, vocab]
                  int32_t* __restrict__ ids,         // [rows, k]
                  float* __restrict__ vals,          // [rows, k]
                  int64_t vocab, int k, int id_top_shift) {
  using Scan = cub::BlockScan<unsigned, kThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  __shared__ unsigned hist[kBins];
  __shared__ unsigned long long winners[kThreads];
  __shared__ unsigned s_digit, s_rank, s_bucket, s_count;
  const float* row = logits + blockIdx.x * vocab;
  const unsigned lane = threadIdx.x % 32;

  // Invariant: the k best keys are those below `prefix` in the decided digits (mask) plus the
  // `rank` best of those equal to it there.
  unsigned long long prefix = 0, mask = 0;
  unsigned rank = static_cast<unsigned>(k);
  int shift = 56;
  for (;;) {
    for (int b = threadIdx.x; b < kBins; b += kThreads) hist[b] = 0;
    __syncthreads();
    ForEachKey(row, vocab, [&](bool valid, unsigned long long key) {
      const bool match = valid && (key & mask) == prefix;
      const unsigned digit = static_cast<unsigned>(key >> shift) & (kBins - 1);
      const unsigned active = __ballot_sync(0xffffffffu, match);
      if (match) {
        const unsigned peers = __match_any_sync(active, digit);
        if (lane == static_cast<unsigned>(__ffs(peers) - 1)) atomicAdd(&hist[digit], __popc(peers));
      }
    });
    __syncthreads();
    const unsigned h = threadIdx.x < kBins ? hist[threadIdx.x] : 0u;
    unsigned before = 0;
    Scan(scan_storage).ExclusiveSum(h, before);
    if (threadIdx.x < kBins && before < rank && rank <= before + h) {
      s_digit = threadIdx.x;
      s_rank = rank - before;
      s_bucket = h;
    }
    __syncthreads();
    prefix |= static_cast<unsigned long long>(s_digit) << shift;
    mask |= static_cast<unsigned long long>(kBins - 1) << shift;
    rank = s_rank;
    // Keys are unique, so by the last digit the bucket is one key and this always ends.
    if (rank == s_bucket || shift == 0) break;
    // Id digits above the largest id are zero in every key: skip them.
    shift = shift == 32 ? id_top_shift : shift - 8;
  }

  // The winners: every key at or below the prefix in the decided digits, exactly k of them.
  if (threadIdx.x == 0) s_count = 0;
  __syncthreads();
  const unsigned long long last = prefix >> shift;
  ForEachKey(row, vocab, [&](bool valid, unsigned long long key) {
    const bool take = valid && (key >> shift) <= last;
    const unsigned taken = __ballot_sync(0xffffffffu, take);
    if (taken == 0) return;
    const int leader = __ffs(taken) - 1;
    unsigned first = 0;
    if (lane == static_cast<unsigned>(leader)) first = atomicAdd(&s_count, static_cast<unsigned>(__popc(taken)));
    first = __shfl_sync(0xffffffffu, first, leader);
    const unsigned slot = first + __popc(taken & ((1u << lane) - 1u));
    if (take && slot < static_cast<unsigned>(k)) winners[slot] = key;
  });
  __syncthreads();

  // Each winner's place is the number of winners with a smaller key.
  if (threadIdx.x < k) {
    const unsigned long long key = winners[threadIdx.x];
    int place = 0;
    for (int j = 0; j < k; ++j) place += winners[j] < key;
    const int64_t out = static_cast<int64_t>(blockIdx.x) * k + place;
    ids[out] = static_cast<int32_t>(key & 0xffffffffull);
    vals[out] = KeyValue(key);
  }
}

// Bits that hold 0 .. n - 1.
int Bits(int64_t n) {
  int bits = 0;
  while ((int64_t{1} << bits) < n) ++bits;
  return bits;
}

}  // namespace

void TopKRows(const float* logits, int32_t* ids, float* vals, int64_t rows, int64_t vocab, int64_t k,
              cudaStream_t stream) {
  if (rows <= 0) return;
  // The id's highest non-zero digit: ids < 2^17 for 128256, so digits 16, 8, 0.
  const int id_top_shift = std::max(0, (Bits(vocab) + 7) / 8 * 8 - 8);
  RowTopKKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, ids, vals, vocab, static_cast<int>(k),
                                                                       id_top_shift);
  KVSERVE_LAUNCH_CHECK();
}

}  // namespace kvserve::cuda
