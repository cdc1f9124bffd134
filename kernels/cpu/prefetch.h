// Software prefetch for the CPU kernels that stream memory the hardware prefetcher follows
// poorly. Why each: a decode step reads every quantized weight once, from DRAM (the model is
// larger than L3), and the dots' per-block work leaves too few requests in flight (on the AVX2
// EPYC box one thread streamed Q4_1 rows at 5.0 GB/s from memory against 9.5 GB/s from L2;
// asking ~2.9 KB ahead lifted batch-1 decode by ~40%); at long context the attention loops
// read each K/V row once, mostly from DRAM, as a strided stream (asking some keys ahead lifted
// 4K decode by about a quarter). docs/PERF.md has both measurements. Included before
// avx512_target.h, so it is compiled for the baseline ISA in every file.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace kvserve::cpu {

// The environment variable `name` as a non-negative integer, or `fallback` when it is unset:
// each distance below can be measured and tuned on another CPU (0 turns that prefetch off).
inline int64_t PrefetchDistanceFromEnv(const char* name, int64_t fallback) {
  const char* env = std::getenv(name);
  return env ? std::max<int64_t>(0, std::atoll(env)) : fallback;
}

// How many keys ahead the attention loops ask for keys and values (paged_attention.cc finds
// where those keys are, in whichever page; attention_dots*.cc ask for them as they read): 32
// by default; KVSERVE_PREFETCH_KEYS=N overrides it.
inline int64_t KvPrefetchDistance() {
  static const int64_t distance = PrefetchDistanceFromEnv("KVSERVE_PREFETCH_KEYS", 32);
  return distance;
}

// Which cache level a software prefetch fills. What is best depends on the core, not on the
// vector ISA: on the Zen 2 EPYC box NTA rather than T0 (or T2: the same as T0) ran the kernel
// bench's 65,536-key decode attention 13% faster and the Q4_1 rows streamed from DRAM 10%
// faster, batch-1 4K decode 7% (docs/PERF.md, twelfth session); on the Zen 4 EPYC box NTA and
// T0 were level and T1 (into L2 only) ran the same attention 35-40% faster, 4K decode ~20%
// (sixteenth session; likely because lines asked for into L1 were evicted by the loads between
// before the loop reached them). The weight dots measured level there, so they stay at NTA.
// On a Sapphire Rapids-class Xeon NTA lost to both others for both streams, by about half.
enum class PrefetchLevel {
  kNta,  // _MM_HINT_NTA
  kL1,   // _MM_HINT_T0
  kL2,   // _MM_HINT_T1
};

// What a CPU's prefetches default to: the level of the K/V rows, the level of the weight rows,
// and how many bytes ahead of the block being read the weight dots (quant_dot*.cc) ask.
struct PrefetchDefaults {
  PrefetchLevel kv_level;
  PrefetchLevel weight_level;
  int64_t weight_bytes;
};

// The defaults measured for a CPU of this CPUID vendor string and display family (prefetch.cc
// says where each was measured; a CPU nobody here measured gets Zen 2's).
PrefetchDefaults PrefetchDefaultsFor(std::string_view vendor, unsigned family);

// What this process uses (prefetch.cc), this CPU's defaults unless KVSERVE_PREFETCH_KV_LEVEL,
// KVSERVE_PREFETCH_WEIGHT_LEVEL (nta, l1 or l2) or KVSERVE_PREFETCH_WEIGHT_BYTES=N says
// otherwise: for the K/V rows of the attention loops and for the weight rows of the dots.
extern const PrefetchLevel kv_prefetch_level;
extern const PrefetchLevel weight_prefetch_level;
extern const int64_t weight_prefetch_bytes;

// How far ahead of the block being read the weight dots ask for bytes (0: no weight prefetch).
inline int64_t WeightPrefetchBytes() { return weight_prefetch_bytes; }

// "nta", "l1" or "l2": the names KVSERVE_PREFETCH_*_LEVEL take and `kvserve bench` prints.
const char* PrefetchLevelName(PrefetchLevel level);

// The level the environment variable `name` names, or `fallback` when it is unset or names
// none (reported on stderr).
PrefetchLevel PrefetchLevelFromEnv(const char* name, PrefetchLevel fallback);

// Asks for the cache lines of the `bytes` bytes (at least one line) that start `offset` bytes
// after `base`, to be filled into `level`: what is asked for here is read once per step. A
// prefetch never faults, so reaching past the end of an array (another page, or nothing) is
// harmless; the address is formed as an integer, never as a pointer past it.
inline void PrefetchBytes(const void* base, int64_t offset, int64_t bytes, PrefetchLevel level) {
  const uintptr_t start = reinterpret_cast<uintptr_t>(base) + static_cast<uintptr_t>(offset);
  // The bound by value: std::max returns a reference, which GCC kept in a stack slot that it
  // stored and reloaded for every line asked for, in the attention loops' hottest path.
  const int64_t end = bytes > 1 ? bytes : 1;
  // One loop per level, each with the instruction written out: with _mm_prefetch behind a
  // switch on a value known only at run time, GCC 12 dropped every prefetch (and the loops
  // around them) as code without effect; an asm volatile is never dropped.
  switch (level) {
    case PrefetchLevel::kL2:
      for (int64_t b = 0; b < end; b += 64) asm volatile("prefetcht1 (%0)" : : "r"(start + b));
      break;
    case PrefetchLevel::kL1:
      for (int64_t b = 0; b < end; b += 64) asm volatile("prefetcht0 (%0)" : : "r"(start + b));
      break;
    case PrefetchLevel::kNta:
      for (int64_t b = 0; b < end; b += 64) asm volatile("prefetchnta (%0)" : : "r"(start + b));
      break;
  }
}

// The two streams' prefetches: K/V rows (attention) and weight rows (quantized dots).
inline void PrefetchKv(const void* base, int64_t offset, int64_t bytes) {
  PrefetchBytes(base, offset, bytes, kv_prefetch_level);
}
inline void PrefetchWeights(const void* base, int64_t offset, int64_t bytes) {
  PrefetchBytes(base, offset, bytes, weight_prefetch_level);
}

}  // namespace kvserve::cpu
