// SplitMix64 (Steele, Lea and Flood, 2014): the one 64-bit mixer kvserve's seeded streams
// draw from (sampler seeding, random models, eval samples): the same numbers on every
// platform and standard library.
#pragma once
#include <cstdint>

namespace kvserve {

// Advances `state` by the golden-ratio increment and returns the mixed value: successive
// calls give the SplitMix64 stream seeded with the first state.
inline uint64_t SplitMix64Next(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The first value of the stream seeded with `x`: a pure 64-bit hash of x.
inline uint64_t SplitMix64(uint64_t x) { return SplitMix64Next(x); }

}  // namespace kvserve
