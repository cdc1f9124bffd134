// fp16 <-> fp32 with F16C (part of the x86-64-v3 baseline).
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace kvserve::cpu {

inline float HalfToFloat(uint16_t h) { return _cvtsh_ss(h); }
inline uint16_t FloatToHalf(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}

}  // namespace kvserve::cpu
