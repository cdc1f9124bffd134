// Software prefetch for the attention loops over cached keys and values (attention_dots*.cc).
// Why: at long context a decode step reads each K/V row once, mostly from DRAM, and one KV
// head's row is a third of a slot's (a strided stream the hardware prefetcher follows
// poorly). Asking for the rows some keys ahead lifted batch-1 decode at 4K tokens by about a
// quarter (docs/PERF.md). Included before avx512_target.h, so it is compiled for the
// baseline ISA in every file.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace kvserve::cpu {

// How many rows ahead the loops ask for: 32 by default; the environment variable
// KVSERVE_PREFETCH_KEYS=N overrides it (0 turns prefetching off), to measure and tune it on
// another CPU.
inline int64_t KvPrefetchDistance() {
  static const int64_t distance = [] {
    const char* env = std::getenv("KVSERVE_PREFETCH_KEYS");
    return env ? std::max<int64_t>(0, std::atoll(env)) : int64_t{32};
  }();
  return distance;
}

// Asks for the cache lines of the `bytes` bytes that start `offset` bytes after `base`. A
// prefetch never faults, so rows past the end of a run (another page, or nothing) are
// harmless; the address is formed as an integer, never as a pointer past the array.
inline void PrefetchKvRow(const void* base, int64_t offset, int64_t bytes) {
  const uintptr_t row = reinterpret_cast<uintptr_t>(base) + static_cast<uintptr_t>(offset);
  for (int64_t b = 0; b < bytes; b += 64) _mm_prefetch(reinterpret_cast<const char*>(row + b), _MM_HINT_T0);
}

}  // namespace kvserve::cpu
