// AVX-512 + VNNI Q4_1 x Q8_1 and Q8_0 x Q8_0 products for many tokens at once (a step of
// batched decodes): 16 weight rows are transposed into a tile in which one 512-bit vector holds
// the same four elements of all 16 rows, so one vpdpbusd against four of a token's activation
// bytes (broadcast) advances 16 dot products, and each token's 16 results come out in one vector.
//
// Why: the row-major token kernel (DotRowsTokens in quant_dot_avx512.cc) spends five more
// instructions per vpdpbusd on per-block scales and its lane layout, and at 32 concurrent
// requests it was 46% of the server's samples, compute-bound (docs/PERF.md, nineteenth
// session; the Q8_0 output head was most of the rest). Here a block costs per token 8 vpdpbusd
// and three or four other operations for 16 rows.
// Its additions are in another order than the one-token kernel's, so its bits differ from a
// decode step of one token: MatMulShared never uses it when asked to be batch-invariant.
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/fp16.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/quant_dot.h"
#include "kernels/cpu/quant_dot_tile.h"

namespace kvserve::cpu::avx512 {
namespace {

// This thread's copy of n_tokens Q8_0 activation rows with 128 added to every quant.
BlockQ8_0* OffsetActivationBuffer(int64_t blocks) {
  thread_local std::vector<BlockQ8_0> buffer;
  buffer.resize(static_cast<size_t>(blocks));
  return buffer.data();
}

}  // namespace
}  // namespace kvserve::cpu::avx512

#include "kernels/cpu/avx512_target.h"  // last: what follows is compiled for AVX-512

namespace kvserve::cpu::avx512 {
namespace {

// The tile's 16 rows against T tokens' Q8_1 rows a[t]: out[t * out_token_stride + i].
// Per token and block: isum = sum of quant products (exact, int32), then
// acc += isum * (d_w * d_a) + m_w * s_a, s_a being the block's d_a * sum(a).
template <int T>
void TileTokens(const RowTile& tile, const BlockQ8_1* const* a, int64_t nb, float* out, int64_t out_token_stride) {
  const __m512i low = _mm512_set1_epi8(0x0F);
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m512i q[8];  // q[k]: elements 4k..4k+3 (k < 4) or 16+4(k-4).. (k >= 4) of every row
    for (int k = 0; k < 4; ++k) {
      const __m512i raw = _mm512_loadu_si512(tile.quads + (b * 4 + k) * kTileRows);
      q[k] = _mm512_and_si512(raw, low);
      q[k + 4] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low);
    }
    const __m512 dw = _mm512_loadu_ps(tile.d + b * kTileRows);
    const __m512 mw = _mm512_loadu_ps(tile.m + b * kTileRows);
    __m512i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
    for (int k = 0; k < 8; ++k) {
      for (int t = 0; t < T; ++t) {
        int32_t quad;
        std::memcpy(&quad, a[t][b].qs + 4 * k, 4);
        isum[t] = _mm512_dpbusd_epi32(isum[t], q[k], _mm512_set1_epi32(quad));
      }
    }
    for (int t = 0; t < T; ++t) {
      const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(HalfToFloat(a[t][b].d)));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), scale, acc[t]);
      acc[t] = _mm512_fmadd_ps(mw, _mm512_set1_ps(HalfToFloat(a[t][b].s)), acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(out + t * out_token_stride, acc[t]);
}

// The same for Q8_0 rows against T tokens' Q8_0 rows a[t] whose quants carry +128 (unsigned):
// isum = sum((a + 128) * w) - 128 * sum(w), exact, then acc += isum * (d_w * d_a).
template <int T>
void TileTokens(const RowTile& tile, const BlockQ8_0* const* a, int64_t nb, float* out, int64_t out_token_stride) {
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m512i q[8];
    for (int k = 0; k < 8; ++k) q[k] = _mm512_loadu_si512(tile.quads + (b * 8 + k) * kTileRows);
    const __m512 dw = _mm512_loadu_ps(tile.d + b * kTileRows);
    const __m512i bias = _mm512_loadu_si512(tile.bias + b * kTileRows);
    __m512i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
    for (int k = 0; k < 8; ++k) {
      for (int t = 0; t < T; ++t) {
        int32_t quad;
        std::memcpy(&quad, a[t][b].qs + 4 * k, 4);
        isum[t] = _mm512_dpbusd_epi32(isum[t], _mm512_set1_epi32(quad), q[k]);
      }
    }
    for (int t = 0; t < T; ++t) {
      const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(HalfToFloat(a[t][b].d)));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(isum[t], bias)), scale, acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(out + t * out_token_stride, acc[t]);
}

constexpr int kMaxTileTokens = 8;  // 8 weight vectors + 8 int + 8 float accumulators: 24 of 32 registers

// The tile against every token, kMaxTileTokens at a time; a[t] are blocks of type AB.
template <typename AB>
void TileAllTokens(const RowTile& tile, const uint8_t* act_rows, int64_t act_row_bytes, int64_t n_tokens,
                   int64_t nb, float* out, int64_t out_token_stride) {
  for (int64_t t = 0; t < n_tokens; t += kMaxTileTokens) {
    const AB* a[kMaxTileTokens];
    const int64_t count = n_tokens - t >= kMaxTileTokens ? kMaxTileTokens : n_tokens - t;
    for (int64_t i = 0; i < count; ++i) a[i] = reinterpret_cast<const AB*>(act_rows + (t + i) * act_row_bytes);
    float* o = out + t * out_token_stride;
    switch (count) {
      case 8: TileTokens<8>(tile, a, nb, o, out_token_stride); break;
      case 7: TileTokens<7>(tile, a, nb, o, out_token_stride); break;
      case 6: TileTokens<6>(tile, a, nb, o, out_token_stride); break;
      case 5: TileTokens<5>(tile, a, nb, o, out_token_stride); break;
      case 4: TileTokens<4>(tile, a, nb, o, out_token_stride); break;
      case 3: TileTokens<3>(tile, a, nb, o, out_token_stride); break;
      case 2: TileTokens<2>(tile, a, nb, o, out_token_stride); break;
      default: TileTokens<1>(tile, a, nb, o, out_token_stride); break;
    }
  }
}

// Q8_0 activation rows with 128 added to every quant, contiguous (row t at t * nb blocks).
const BlockQ8_0* OffsetActivations(const uint8_t* act_rows, int64_t act_row_bytes, int64_t n_tokens, int64_t nb) {
  BlockQ8_0* out = OffsetActivationBuffer(n_tokens * nb);
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int64_t t = 0; t < n_tokens; ++t) {
    const auto* row = reinterpret_cast<const BlockQ8_0*>(act_rows + t * act_row_bytes);
    for (int64_t b = 0; b < nb; ++b) {
      BlockQ8_0& o = out[t * nb + b];
      o.d = row[b].d;
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row[b].qs));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o.qs), _mm256_xor_si256(q, flip));
    }
  }
  return out;
}

}  // namespace

void QuantDotRowTilesTokens(DType w, const uint8_t* w_rows, int64_t row_bytes, int64_t n_rows, const uint8_t* act_rows,
                            int64_t act_row_bytes, int64_t n_tokens, int64_t n, float* out, int64_t out_token_stride) {
  // A Q8_0 tile costs twice a Q4_1 one to fill (and its bias), which only pays from 8 tokens on
  // (BM_Q8_0Tokens: 0.5-0.8x the row-major kernel at 2-4 tokens, 1.4x at 8, 2.5x at 32).
  constexpr int64_t kQ8_0MinTokens = 8;
  if (w != DType::kQ4_1 && !(w == DType::kQ8_0 && n_tokens >= kQ8_0MinTokens)) {
    QuantDotRowsTokens(w, w_rows, row_bytes, n_rows, act_rows, act_row_bytes, n_tokens, n, out, out_token_stride);
    return;
  }
  const int64_t nb = n / kQK;
  const uint8_t* acts = act_rows;
  int64_t acts_row_bytes = act_row_bytes;
  if (w == DType::kQ8_0 && n_rows >= kTileRows) {
    acts = reinterpret_cast<const uint8_t*>(OffsetActivations(act_rows, act_row_bytes, n_tokens, nb));
    acts_row_bytes = nb * int64_t{sizeof(BlockQ8_0)};
  }
  int64_t r = 0;
  for (; r + kTileRows <= n_rows; r += kTileRows) {
    const RowTile tile = FillRowTile(w, w_rows + r * row_bytes, row_bytes, nb);
    if (w == DType::kQ4_1) {
      TileAllTokens<BlockQ8_1>(tile, acts, acts_row_bytes, n_tokens, nb, out + r, out_token_stride);
    } else {
      TileAllTokens<BlockQ8_0>(tile, acts, acts_row_bytes, n_tokens, nb, out + r, out_token_stride);
    }
  }
  if (r < n_rows) {  // fewer than 16 rows left: the row-major kernel, on the tokens as given
    QuantDotRowsTokens(w, w_rows + r * row_bytes, row_bytes, n_rows - r, act_rows, act_row_bytes, n_tokens, n, out + r,
                       out_token_stride);
  }
}

}  // namespace kvserve::cpu::avx512

KVSERVE_AVX512_END
