// Per-head top-k for all KV heads of a layer at once. One CUB radix sort over heads * len
// items orders (head, score descending, slot ascending) keys with slot values, which is
// exactly the CPU rule (higher score first, then lower slot). The slot is part of the key
// whenever head, score and slot bits fit 64 (up to 2^29 slots with 8 heads); beyond that the
// radix sort's stability keeps equal scores in slot order. The first k of each head are
// flagged, and a CUB select compacts the flagged (head, slot) indices, which come out in
// ascending slot order per head.
#include <algorithm>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_select.cuh>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"

namespace kvserve::cuda {
namespace {

size_t Align(size_t b) { return (b + 255) / 256 * 256; }

// Bits that hold 0 .. n - 1.
int Bits(int64_t n) {
  int bits = 0;
  while ((int64_t{1} << bits) < n) ++bits;
  return bits;
}

struct Layout {
  unsigned long long *keys_in, *keys_out;  // [n]
  int32_t *vals_in, *vals_out;             // [n] slot within the head
  int32_t* index;                          // [n] global index h * len + s
  int32_t* selected;                       // [n] flagged indices, compacted
  int32_t* n_selected;                     // [1]
  unsigned char* flags;                    // [n]
  void* temp;
  size_t temp_bytes;
};

// Bits of the slot in the key's low end: all of them when they fit, else none.
int SlotBits(int64_t heads, int64_t len) { return Bits(heads) + Bits(len) <= 32 ? Bits(len) : 0; }

int EndBit(int64_t heads, int64_t len) { return SlotBits(heads, len) + 32 + Bits(heads); }

size_t CubTempBytes(int64_t n, int64_t heads, int64_t len) {
  size_t sort = 0, select = 0;
  KVSERVE_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort, static_cast<unsigned long long*>(nullptr),
                                                     static_cast<unsigned long long*>(nullptr),
                                                     static_cast<int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
                                                     n, 0, EndBit(heads, len)));
  KVSERVE_CUDA_CHECK(cub::DeviceSelect::Flagged(nullptr, select, static_cast<int32_t*>(nullptr),
                                                static_cast<unsigned char*>(nullptr), static_cast<int32_t*>(nullptr),
                                                static_cast<int32_t*>(nullptr), n));
  return std::max(sort, select);
}

Layout MakeLayout(void* scratch, int64_t n, int64_t heads, int64_t len) {
  Layout l;
  auto* p = static_cast<unsigned char*>(scratch);
  auto take = [&p](size_t bytes) {
    void* r = p;
    p += Align(bytes);
    return r;
  };
  l.keys_in = static_cast<unsigned long long*>(take(sizeof(unsigned long long) * n));
  l.keys_out = static_cast<unsigned long long*>(take(sizeof(unsigned long long) * n));
  l.vals_in = static_cast<int32_t*>(take(sizeof(int32_t) * n));
  l.vals_out = static_cast<int32_t*>(take(sizeof(int32_t) * n));
  l.index = static_cast<int32_t*>(take(sizeof(int32_t) * n));
  l.selected = static_cast<int32_t*>(take(sizeof(int32_t) * n));
  l.n_selected = static_cast<int32_t*>(take(sizeof(int32_t)));
  l.flags = static_cast<unsigned char*>(take(n));
  l.temp_bytes = CubTempBytes(n, heads, len);
  l.temp = take(l.temp_bytes);
  return l;
}

// key = head | bits that sort ascending as the score descends | slot (slot_bits wide).
__global__ void MakeKeysKernel(const float* __restrict__ scores,           // [heads, len]
                               unsigned long long* __restrict__ keys,      // [heads * len]
                               int32_t* __restrict__ slots,                // [heads * len]
                               int32_t* __restrict__ index,                // [heads * len]
                               unsigned char* __restrict__ flags,          // [heads * len]
                               int64_t len, int64_t n, int slot_bits) {
  const int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= n) return;
  const int64_t h = p / len, slot = p - h * len;
  // NaN ranks as -inf (last), as in the sampling top-k; -0.0 ties with +0.0, as under the
  // CPU's operator==.
  const float f = isnan(scores[p]) ? -INFINITY : scores[p];
  const unsigned u = f == 0.0f ? 0u : __float_as_uint(f);
  const unsigned ascending = (u & 0x80000000u) ? ~u : (u | 0x80000000u);  // float order as unsigned order
  keys[p] = (((static_cast<unsigned long long>(h) << 32) | static_cast<unsigned long long>(~ascending)) << slot_bits) |
            (slot_bits ? static_cast<unsigned long long>(slot) : 0ull);
  slots[p] = static_cast<int32_t>(slot);
  index[p] = static_cast<int32_t>(p);
  flags[p] = 0;
}

__global__ void FlagTopKernel(const int32_t* __restrict__ sorted_slots,  // [heads * len], per head best first
                              unsigned char* __restrict__ flags,         // [heads * len]
                              int64_t len, int64_t k, int64_t n) {
  const int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= n) return;
  const int64_t h = p / len, rank = p - h * len;
  if (rank < k) flags[h * len + sorted_slots[p]] = 1;
}

// Exactly k indices per head were flagged, so output i belongs to head i / k.
__global__ void SlotsKernel(const int32_t* __restrict__ selected,  // [heads * k] global indices
                            int32_t* __restrict__ slots,           // [heads, k]
                            int64_t len, int64_t k, int64_t total) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < total) slots[i] = static_cast<int32_t>(selected[i] - (i / k) * len);
}

unsigned Blocks(int64_t n) { return static_cast<unsigned>((n + 255) / 256); }

}  // namespace

size_t TopKScratchBytes(int64_t heads, int64_t len) {
  const int64_t n = heads * len;
  return Align(sizeof(unsigned long long) * n) * 2 + Align(sizeof(int32_t) * n) * 4 + Align(sizeof(int32_t)) +
         Align(static_cast<size_t>(n)) + Align(CubTempBytes(n, heads, len));
}

void TopKPerHead(const float* scores, int32_t* slots, void* scratch, int64_t heads, int64_t len, int64_t k,
                 cudaStream_t stream) {
  const int64_t n = heads * len;
  if (n <= 0 || k <= 0) return;
  if (k > len) {  // SlotsKernel would read past the selection
    std::fprintf(stderr, "kvserve: TopKPerHead k=%lld > len=%lld\n", static_cast<long long>(k),
                 static_cast<long long>(len));
    std::abort();
  }
  Layout l = MakeLayout(scratch, n, heads, len);
  MakeKeysKernel<<<Blocks(n), 256, 0, stream>>>(scores, l.keys_in, l.vals_in, l.index, l.flags, len, n,
                                                SlotBits(heads, len));
  KVSERVE_LAUNCH_CHECK();
  KVSERVE_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(l.temp, l.temp_bytes, l.keys_in, l.keys_out, l.vals_in,
                                                     l.vals_out, n, 0, EndBit(heads, len), stream));
  FlagTopKernel<<<Blocks(n), 256, 0, stream>>>(l.vals_out, l.flags, len, k, n);
  KVSERVE_LAUNCH_CHECK();
  KVSERVE_CUDA_CHECK(cub::DeviceSelect::Flagged(l.temp, l.temp_bytes, l.index, l.flags, l.selected, l.n_selected, n,
                                                stream));
  SlotsKernel<<<Blocks(heads * k), 256, 0, stream>>>(l.selected, slots, len, k, heads * k);
  KVSERVE_LAUNCH_CHECK();
}

}  // namespace kvserve::cuda
