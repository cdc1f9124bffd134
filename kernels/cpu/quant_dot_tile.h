// The row tile the batched-decode kernels share (quant_dot_tile_avx512.cc, quant_dot_tile_avx2.cc):
// 16 weight rows transposed so that one vector holds the same four quant bytes of every row,
// and a multiply against four of a token's bytes (broadcast) advances all the rows' dots at once.
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/fp16.h"
#include "kernels/cpu/prefetch.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/dtype.h"

namespace kvserve::cpu {

constexpr int kTileRows = 16;  // one int32 / float lane per row in a 512-bit vector; two 256-bit halves

// 16 rows of nb blocks, transposed: quads[(b * kQuads + k) * 16 + i] is bytes 4k..4k+3 of row
// i's quants in block b, d[b * 16 + i] its scale in fp32. Q4_1 (kQuads 4): the low nibbles are
// elements 4k..4k+3, the high ones 16+4k..16+4k+3, and m[b * 16 + i] is the minimum. Q8_0
// (kQuads 8): elements 4k..4k+3 as they are, and bias[b * 16 + i] = 128 * the block's quant sum
// (vpdpbusd multiplies unsigned by signed bytes, so the token's bytes go in with 128 added).
struct RowTile {
  const uint32_t* quads;
  const float* d;
  const float* m;
  const int32_t* bias;
};

// The 16 rows at w_rows (Q4_1 or Q8_0, row_bytes apart, nb blocks each) filled into this
// thread's buffers, valid until its next call. Inline, so the kernels' tile loops inline it (as
// a call into another file it cost batch-8 decode ~3%); include this header before
// avx512_target.h, so std::vector's members are never instantiated with AVX-512 (see there).
inline RowTile FillRowTile(DType w, const uint8_t* w_rows, int64_t row_bytes, int64_t nb) {
  thread_local std::vector<uint32_t> quads;
  thread_local std::vector<float> scales;  // d then m
  thread_local std::vector<int32_t> bias;
  const int quads_per_block = w == DType::kQ4_1 ? 4 : 8;
  quads.resize(static_cast<size_t>(nb * quads_per_block * kTileRows));
  scales.resize(static_cast<size_t>(2 * nb * kTileRows));
  bias.resize(static_cast<size_t>(nb * kTileRows));
  float* d = scales.data();
  float* m = d + nb * kTileRows;
  for (int i = 0; i < kTileRows; ++i) {
    const uint8_t* row = w_rows + i * row_bytes;
    // The same row of the next 16: QuantDotTasks hands each thread consecutive tasks, so that
    // is most likely this thread's next tile, and it arrives while these rows are worked on
    // (engine bench, Intel box: batch 8 decode +33%, batch 32 +10%; two tiles ahead measured level).
    PrefetchWeights(row, kTileRows * row_bytes, row_bytes);
    for (int64_t b = 0; b < nb; ++b) {
      uint32_t* q = &quads[b * quads_per_block * kTileRows + i];
      if (w == DType::kQ4_1) {
        const auto& block = reinterpret_cast<const BlockQ4_1*>(row)[b];
        for (int k = 0; k < 4; ++k) std::memcpy(q + k * kTileRows, block.qs + 4 * k, 4);
        d[b * kTileRows + i] = HalfToFloat(block.d);
        m[b * kTileRows + i] = HalfToFloat(block.m);
      } else {
        const auto& block = reinterpret_cast<const BlockQ8_0*>(row)[b];
        for (int k = 0; k < 8; ++k) std::memcpy(q + k * kTileRows, block.qs + 4 * k, 4);
        d[b * kTileRows + i] = HalfToFloat(block.d);
        int32_t sum = 0;
        for (int8_t x : block.qs) sum += x;
        bias[b * kTileRows + i] = 128 * sum;
      }
    }
  }
  return {quads.data(), d, m, bias.data()};
}

}  // namespace kvserve::cpu
