// AVX2 Q4_1 x Q8_1 products for many tokens at once (a step of batched decodes), on the row
// tile of quant_dot_tile.h: each 256-bit half of a tile vector holds the same four quant bytes
// of 8 rows, so vpmaddubsw against four of a token's bytes (broadcast) advances 8 dot products
// by four elements. The AVX-512 version (quant_dot_tile_avx512.cc) has why; without vpdpbusd,
// a block's eight 16-bit pair sums are added in 16 bits (|sum| <= 8 * 2 * 15 * 128 < 2^15:
// exact) and widened once per block. Q4_0 and Q8_0 keep the row-major token kernel here.
// Its additions are in another order than the one-token kernel's: never batch-invariant.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/fp16.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/quant_dot.h"
#include "kernels/cpu/quant_dot_tile.h"

namespace kvserve::cpu::avx2 {
namespace {

constexpr int kHalfRows = 8;  // int32 / float lanes in 256 bits

// Rows 8h..8h+7 of the tile against T tokens' Q8_1 rows a[t]: out[t * out_token_stride + i].
// Per token and block: isum = the quant products' sum (exact), then
// acc += isum * (d_w * d_a) + m_w * s_a, s_a being the block's d_a * sum(a).
template <int T>
void HalfTileTokens(const RowTile& tile, int h, const BlockQ8_1* const* a, int64_t nb, float* out,
                    int64_t out_token_stride) {
  const __m256i low = _mm256_set1_epi8(0x0F);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m256i q[8];  // q[k]: elements 4k..4k+3 (k < 4) or 16+4(k-4).. (k >= 4) of the 8 rows
    for (int k = 0; k < 4; ++k) {
      const __m256i raw =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile.quads + (b * 4 + k) * kTileRows + h * kHalfRows));
      q[k] = _mm256_and_si256(raw, low);
      q[k + 4] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low);
    }
    const __m256 dw = _mm256_loadu_ps(tile.d + b * kTileRows + h * kHalfRows);
    const __m256 mw = _mm256_loadu_ps(tile.m + b * kTileRows + h * kHalfRows);
    for (int t = 0; t < T; ++t) {
      __m256i pairs = _mm256_setzero_si256();
      for (int k = 0; k < 8; ++k) {
        int32_t quad;
        std::memcpy(&quad, a[t][b].qs + 4 * k, 4);
        pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(q[k], _mm256_set1_epi32(quad)));
      }
      const __m256i isum = _mm256_madd_epi16(pairs, ones);
      const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(HalfToFloat(a[t][b].d)));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), scale, acc[t]);
      acc[t] = _mm256_fmadd_ps(mw, _mm256_set1_ps(HalfToFloat(a[t][b].s)), acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) _mm256_storeu_ps(out + t * out_token_stride + h * kHalfRows, acc[t]);
}

constexpr int kMaxTileTokens = 4;  // 8 weight vectors + 4 accumulators + temporaries: 16 registers

// Both halves of the tile against every token, kMaxTileTokens at a time.
void TileAllTokens(const RowTile& tile, const uint8_t* act_rows, int64_t act_row_bytes, int64_t n_tokens, int64_t nb,
                   float* out, int64_t out_token_stride) {
  for (int64_t t = 0; t < n_tokens; t += kMaxTileTokens) {
    const BlockQ8_1* a[kMaxTileTokens];
    const int64_t count = n_tokens - t >= kMaxTileTokens ? kMaxTileTokens : n_tokens - t;
    for (int64_t i = 0; i < count; ++i) a[i] = reinterpret_cast<const BlockQ8_1*>(act_rows + (t + i) * act_row_bytes);
    float* o = out + t * out_token_stride;
    for (int h = 0; h < kTileRows / kHalfRows; ++h) {
      switch (count) {
        case 4: HalfTileTokens<4>(tile, h, a, nb, o, out_token_stride); break;
        case 3: HalfTileTokens<3>(tile, h, a, nb, o, out_token_stride); break;
        case 2: HalfTileTokens<2>(tile, h, a, nb, o, out_token_stride); break;
        default: HalfTileTokens<1>(tile, h, a, nb, o, out_token_stride); break;
      }
    }
  }
}

}  // namespace

void QuantDotRowTilesTokens(DType w, const uint8_t* w_rows, int64_t row_bytes, int64_t n_rows, const uint8_t* act_rows,
                            int64_t act_row_bytes, int64_t n_tokens, int64_t n, float* out, int64_t out_token_stride) {
  if (w != DType::kQ4_1) {
    QuantDotRowsTokens(w, w_rows, row_bytes, n_rows, act_rows, act_row_bytes, n_tokens, n, out, out_token_stride);
    return;
  }
  const int64_t nb = n / kQK;
  int64_t r = 0;
  for (; r + kTileRows <= n_rows; r += kTileRows) {
    TileAllTokens(FillRowTile(w, w_rows + r * row_bytes, row_bytes, nb), act_rows, act_row_bytes, n_tokens, nb,
                  out + r, out_token_stride);
  }
  if (r < n_rows) {  // fewer than 16 rows left: the row-major kernel
    QuantDotRowsTokens(w, w_rows + r * row_bytes, row_bytes, n_rows - r, act_rows, act_row_bytes, n_tokens, n, out + r,
                       out_token_stride);
  }
}

}  // namespace kvserve::cpu::avx2
