// Random quantized rows and float data for kernel tests (deterministic per seed).
#pragma once
#include <algorithm>
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

// A selection's kept slots [heads, k], ascending per head: per head k distinct random slots of
// [0, len), drawn from rng.
inline std::vector<int32_t> RandomKeptSlots(int64_t len, int64_t heads, int64_t k, std::mt19937& rng) {
  std::vector<int32_t> slots;
  for (int64_t h = 0; h < heads; ++h) {
    std::vector<int32_t> all(static_cast<size_t>(len));
    for (int64_t s = 0; s < len; ++s) all[static_cast<size_t>(s)] = static_cast<int32_t>(s);
    std::shuffle(all.begin(), all.end(), rng);
    all.resize(static_cast<size_t>(k));
    std::sort(all.begin(), all.end());
    slots.insert(slots.end(), all.begin(), all.end());
  }
  return slots;
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
