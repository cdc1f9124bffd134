// The row tile the batched-decode kernels share (quant_dot_tile_avx512.cc, quant_dot_tile_avx2.cc):
// 16 weight rows transposed so that one vector holds the same four quant bytes of every row,
// and a multiply against four of a token's bytes (broadcast) advances all the rows' dots at once.
#pragma once
#include <cstdint>

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
// thread's buffers, valid until its next call. Compiled with the baseline flags (quant_dot_tile.cc):
// std::vector's members must never be instantiated with AVX-512 (see avx512_target.h).
RowTile FillRowTile(DType w, const uint8_t* w_rows, int64_t row_bytes, int64_t nb);

}  // namespace kvserve::cpu
