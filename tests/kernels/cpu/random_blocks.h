// Random quantized rows and float data for kernel tests (deterministic per seed).
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/fp16.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/dtype.h"

namespace kvserve::testing {

inline std::vector<float> RandomFloats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// rows x cols weights of a 32-block type with random quants and plausible fp16 scales.
inline std::vector<uint8_t> RandomQuantRows(DType t, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255), q8(-127, 127);
  std::uniform_real_distribution<float> scale(0.001f, 0.05f), minv(-0.4f, 0.0f);
  std::vector<uint8_t> out(static_cast<size_t>(RowBytes(t, cols) * rows));
  const int64_t nb = rows * cols / cpu::kQK;
  for (int64_t b = 0; b < nb; ++b) {
    if (t == DType::kQ4_1) {
      auto* blk = reinterpret_cast<cpu::BlockQ4_1*>(out.data()) + b;
      blk->d = cpu::FloatToHalf(scale(rng));
      blk->m = cpu::FloatToHalf(minv(rng));
      for (auto& q : blk->qs) q = static_cast<uint8_t>(byte(rng));
    } else if (t == DType::kQ4_0) {
      auto* blk = reinterpret_cast<cpu::BlockQ4_0*>(out.data()) + b;
      blk->d = cpu::FloatToHalf(scale(rng));
      for (auto& q : blk->qs) q = static_cast<uint8_t>(byte(rng));
    } else if (t == DType::kQ8_0) {
      auto* blk = reinterpret_cast<cpu::BlockQ8_0*>(out.data()) + b;
      blk->d = cpu::FloatToHalf(scale(rng) / 8);
      for (auto& q : blk->qs) q = static_cast<int8_t>(q8(rng));
    }
  }
  return out;
}

}  // namespace kvserve::testing
