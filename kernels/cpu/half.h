// Scalar conversions between fp32 and the two 16-bit float formats weights are stored in
// (IEEE fp16 and bfloat16). Bit-exact reference code: the SIMD paths are checked against it.
#pragma once
#include <cstdint>
#include <cstring>

namespace kvserve {

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

inline float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// fp16 -> fp32 is exact: every fp16 value (subnormals, infinities, NaN payloads) has an
// fp32 representation.
inline float Fp16ToFp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return BitsToFloat(sign | 0x7f800000u | (mant << 13));  // inf / NaN
  if (exp != 0) return BitsToFloat(sign | ((exp + 112) << 23) | (mant << 13));
  if (mant == 0) return BitsToFloat(sign);  // signed zero
  // Subnormal: value = mant * 2^-24; normalise the mantissa into fp32's implicit-1 form.
  int e = 113;  // fp32 biased exponent of 2^-14, the fp16 subnormal scale
  while ((mant & 0x400u) == 0) {
    mant <<= 1;
    --e;
  }
  return BitsToFloat(sign | (static_cast<uint32_t>(e) << 23) | ((mant & 0x3ffu) << 13));
}

// fp32 -> fp16 rounding to nearest, ties to even; overflow gives infinity, NaN stays NaN
// (quiet), tiny values become fp16 subnormals or zero.
inline uint16_t Fp32ToFp16(float f) {
  const uint32_t u = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x1ffu));
  if (abs >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65536 or inf
  if (abs >= 0x38800000u) {
    // Normal fp16 range [2^-14, 65536): re-bias the exponent, round the 13 dropped bits.
    // A carry out of the mantissa correctly bumps the exponent (up to infinity).
    const uint32_t base = ((abs >> 13) - (112u << 10));
    const uint32_t rest = abs & 0x1fffu;
    uint32_t h = base;
    if (rest > 0x1000u || (rest == 0x1000u && (base & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  if (abs < 0x33000000u) return sign;  // below half the smallest subnormal (2^-25): zero
  // Subnormal fp16: value / 2^-24 rounded to an integer mantissa.
  const uint32_t e = abs >> 23;                  // in [102, 112]
  const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - e;                // 14..24: bits to drop
  uint32_t h = mant >> shift;
  const uint32_t rest = mant & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

// bfloat16 is the top half of an fp32, so widening is a shift.
inline float Bf16ToFp32(uint16_t b) { return BitsToFloat(static_cast<uint32_t>(b) << 16); }

// fp32 -> bf16 rounding to nearest, ties to even; NaN is kept NaN (quiet bit set) rather
// than letting rounding carry it into infinity.
inline uint16_t Fp32ToBf16(float f) {
  const uint32_t u = FloatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  const uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

}  // namespace kvserve
