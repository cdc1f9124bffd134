// Scalar dequantization of GGML block formats. Written for clarity, not speed: each block
// type gets its own function that spells out where every bit of the block lives.
#include "kernels/cpu/dequantize.h"

#include <cstring>

#include "kernels/cpu/half.h"

namespace kvserve {
namespace {

constexpr int kQK = 32;     // elements per block of the "legacy" quants (Q4_0, Q4_1, Q8_0)
constexpr int kQKK = 256;   // elements per super-block of the K-quants

// Blocks are byte-packed in the file, so multi-byte fields may be unaligned: read via memcpy.
uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

float LoadHalf(const uint8_t* p) { return Fp16ToFp32(LoadU16(p)); }

// Q4_0: fp16 d, then 16 bytes of nibbles. Byte i holds element i (low nibble) and element
// i + 16 (high nibble); the stored nibble is offset by 8 to make it signed.
void DequantQ4_0(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const uint8_t* qs = b + 2;
  for (int i = 0; i < kQK / 2; ++i) {
    y[i] = d * static_cast<float>((qs[i] & 0x0f) - 8);
    y[i + kQK / 2] = d * static_cast<float>((qs[i] >> 4) - 8);
  }
}

// Q4_1: fp16 d, fp16 m (the block minimum), nibbles as in Q4_0 but unsigned: y = d*q + m.
void DequantQ4_1(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const float m = LoadHalf(b + 2);
  const uint8_t* qs = b + 4;
  for (int i = 0; i < kQK / 2; ++i) {
    y[i] = d * static_cast<float>(qs[i] & 0x0f) + m;
    y[i + kQK / 2] = d * static_cast<float>(qs[i] >> 4) + m;
  }
}

// Q8_0: fp16 d, then 32 signed bytes.
void DequantQ8_0(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const int8_t* qs = reinterpret_cast<const int8_t*>(b + 2);
  for (int i = 0; i < kQK; ++i) y[i] = d * static_cast<float>(qs[i]);
}

// The 12 scale bytes of Q4_K/Q5_K pack eight 6-bit scales and eight 6-bit mins, one pair
// per 32-element sub-block. Sub-blocks 0..3 use the low 6 bits of bytes 0..3 (scale) and
// 4..7 (min). Sub-blocks 4..7 take their low 4 bits from the nibbles of bytes 8..11 (scale
// low, min high) and their top 2 bits from the spare high bits of bytes 0..3 / 4..7.
void ScaleMinK4(int j, const uint8_t* s, int* scale, int* min) {
  if (j < 4) {
    *scale = s[j] & 63;
    *min = s[j + 4] & 63;
  } else {
    *scale = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
    *min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Q4_K: fp16 d, fp16 dmin, 12 scale bytes, 128 nibble bytes. The nibbles come in 4 chunks
// of 32 bytes; chunk c holds sub-block 2c in its low nibbles and 2c+1 in its high nibbles.
// y = d*scale_j*q - dmin*min_j.
void DequantQ4_K(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const float dmin = LoadHalf(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qs = b + 16;
  for (int j = 0; j < 8; ++j) {
    int sc, mn;
    ScaleMinK4(j, scales, &sc, &mn);
    const float dl = d * static_cast<float>(sc);
    const float ml = dmin * static_cast<float>(mn);
    const uint8_t* q = qs + (j / 2) * 32;
    const int shift = (j % 2) * 4;
    for (int l = 0; l < 32; ++l) {
      y[j * 32 + l] = dl * static_cast<float>((q[l] >> shift) & 0x0f) - ml;
    }
  }
}

// Q5_K: as Q4_K plus a fifth bit per element: after the scales come 32 bytes qh where bit j
// of qh[l] is the high bit of element l of sub-block j; then the 128 nibble bytes.
void DequantQ5_K(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const float dmin = LoadHalf(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + 48;
  for (int j = 0; j < 8; ++j) {
    int sc, mn;
    ScaleMinK4(j, scales, &sc, &mn);
    const float dl = d * static_cast<float>(sc);
    const float ml = dmin * static_cast<float>(mn);
    const uint8_t* q = qs + (j / 2) * 32;
    const int shift = (j % 2) * 4;
    for (int l = 0; l < 32; ++l) {
      const int lo = (q[l] >> shift) & 0x0f;
      const int hi = (qh[l] >> j) & 1;
      y[j * 32 + l] = dl * static_cast<float>(lo | (hi << 4)) - ml;
    }
  }
}

// Q6_K: 128 bytes ql (low 4 bits), 64 bytes qh (high 2 bits), 16 int8 scales (one per 16
// elements), fp16 d last. The super-block is two halves of 128; in half h, element p
// (0..127) takes its low nibble from ql[64h + p%64] (low nibble if p < 64, else high) and
// its high 2 bits from qh[32h + p%32] at bit 2*(p/32). The 6-bit value is offset by 32.
void DequantQ6_K(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* scales = reinterpret_cast<const int8_t*>(b + 192);
  const float d = LoadHalf(b + 208);
  for (int h = 0; h < 2; ++h) {
    for (int p = 0; p < 128; ++p) {
      const int lo = (ql[64 * h + p % 64] >> (4 * (p / 64))) & 0x0f;
      const int hi = (qh[32 * h + p % 32] >> (2 * (p / 32))) & 0x03;
      const int idx = 128 * h + p;
      const float dl = d * static_cast<float>(scales[idx / 16]);
      y[idx] = dl * static_cast<float>((lo | (hi << 4)) - 32);
    }
  }
}

template <int kElems, int kBytes, void (*kBlock)(const uint8_t*, float*)>
void DequantBlocks(const void* src, float* dst, int64_t n) {
  const uint8_t* b = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n / kElems; ++i) kBlock(b + i * kBytes, dst + i * kElems);
}

}  // namespace

void DequantizeRow(DType t, const void* src, float* dst, int64_t n) {
  const uint8_t* s = static_cast<const uint8_t*>(src);
  switch (t) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = Fp16ToFp32(LoadU16(s + 2 * i));
      return;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToFp32(LoadU16(s + 2 * i));
      return;
    case DType::kQ4_0: return DequantBlocks<kQK, 18, DequantQ4_0>(src, dst, n);
    case DType::kQ4_1: return DequantBlocks<kQK, 20, DequantQ4_1>(src, dst, n);
    case DType::kQ8_0: return DequantBlocks<kQK, 34, DequantQ8_0>(src, dst, n);
    case DType::kQ4_K: return DequantBlocks<kQKK, 144, DequantQ4_K>(src, dst, n);
    case DType::kQ5_K: return DequantBlocks<kQKK, 176, DequantQ5_K>(src, dst, n);
    case DType::kQ6_K: return DequantBlocks<kQKK, 210, DequantQ6_K>(src, dst, n);
    case DType::kQ8_1:
      break;
  }
  // Unreachable for weight types (IsSupportedWeightType gates what reaches here); zero
  // the output rather than leave garbage.
  std::memset(dst, 0, static_cast<size_t>(n) * sizeof(float));
}

}  // namespace kvserve
