// GGML block layouts of the quantized types kvserve computes with directly.
#pragma once
#include <cstdint>

namespace kvserve::cpu {

constexpr int kQK = 32;  // elements per Q4_0/Q4_1/Q8_0/Q8_1 block

struct BlockQ4_0 {
  uint16_t d;             // fp16 scale
  uint8_t qs[kQK / 2];    // element j in the low nibble of qs[j], j+16 in the high nibble
};
struct BlockQ4_1 {
  uint16_t d;             // fp16 scale
  uint16_t m;             // fp16 minimum
  uint8_t qs[kQK / 2];
};
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;             // fp16 of d * sum(qs), so Q4_1's minimum folds in with one multiply
  int8_t qs[kQK];
};
static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ8_1) == 36);

}  // namespace kvserve::cpu
