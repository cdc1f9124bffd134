// Software prefetch for the quantized weight rows of the AVX2 dot-product kernels
// (quant_dot.cc). Why: a decode step reads every weight once, from DRAM (the model is larger
// than L3), and the dots' per-block work leaves the hardware prefetcher too few requests in
// flight: on the AVX2 EPYC box one thread streamed Q4_1 rows at 5.0 GB/s from memory against
// 9.5 GB/s from L2. Asking for the bytes ~2.9 KB ahead lifted that to 7.1 GB/s and batch-1
// decode by ~40% (docs/PERF.md, eighth session).
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace kvserve::cpu {

// How far ahead of the block being read the kernels ask for weight bytes: 2,880 by default
// (eight Q4_1 rows of SmolLM2's 576 columns, the best of 720-5,760 measured); the environment
// variable KVSERVE_PREFETCH_WEIGHT_BYTES=N overrides it (0 turns it off), to tune it on
// another CPU.
inline int64_t WeightPrefetchBytes() {
  static const int64_t bytes = [] {
    const char* env = std::getenv("KVSERVE_PREFETCH_WEIGHT_BYTES");
    return env ? std::max<int64_t>(0, std::atoll(env)) : int64_t{2880};
  }();
  return bytes;
}

// Asks for the cache line `ahead` bytes after p. A prefetch never faults, so reaching past the
// last row is harmless; the address is formed as an integer, never as a pointer past the array.
inline void PrefetchWeights(const void* p, int64_t ahead) {
  _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(ahead)),
               _MM_HINT_T0);
}

}  // namespace kvserve::cpu
