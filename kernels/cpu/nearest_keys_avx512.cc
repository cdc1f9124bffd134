// The AVX-512 kernel of NearestKeys (nearest_keys.h): a panel's 32 keys are two registers, so
// eight rows at a time keep sixteen accumulators; the same sums in the same order as the AVX2
// kernel and the plain loop.
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/nearest_keys.h"
#include "kernels/cpu/avx512_target.h"  // last: what follows is compiled for AVX-512

namespace kvserve::cpu::avx512 {
namespace {

constexpr int kRows = 8;

template <int R>
void PanelTile(const float* a, int64_t d, const float* panel, const float* sq, int32_t j0, float* bv, int32_t* bi) {
  __m512 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t e = 0; e < d; ++e) {
    const float* p = panel + e * kNearestPanelKeys;
    const __m512 b0 = _mm512_loadu_ps(p), b1 = _mm512_loadu_ps(p + 16);
    for (int r = 0; r < R; ++r) {
      const __m512 x = _mm512_set1_ps(a[r * d + e]);
      acc[r][0] = _mm512_fmadd_ps(x, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(x, b1, acc[r][1]);
    }
  }
  const __m512 minus2 = _mm512_set1_ps(-2.0f);
  for (int c = 0; c < 2; ++c) {
    const __m512 s = _mm512_loadu_ps(sq + c * 16);
    const __m512i idx = _mm512_add_epi32(_mm512_set1_epi32(j0 + c * 16),
                                         _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    for (int r = 0; r < R; ++r) {
      float* v_at = bv + r * kNearestPanelKeys + c * 16;
      int32_t* i_at = bi + r * kNearestPanelKeys + c * 16;
      const __m512 v = _mm512_fmadd_ps(minus2, acc[r][c], s);
      const __mmask16 lt = _mm512_cmp_ps_mask(v, _mm512_loadu_ps(v_at), _CMP_LT_OQ);
      _mm512_mask_storeu_ps(v_at, lt, v);
      _mm512_mask_storeu_epi32(i_at, lt, idx);
    }
  }
}

using TileFn = void(const float*, int64_t, const float*, const float*, int32_t, float*, int32_t*);
constexpr TileFn* kTiles[kRows + 1] = {nullptr,       PanelTile<1>, PanelTile<2>, PanelTile<3>, PanelTile<4>,
                                       PanelTile<5>, PanelTile<6>, PanelTile<7>, PanelTile<8>};

}  // namespace

void NearestPanels(const float* a, int64_t m, int64_t d, const float* panels, int64_t p0, int64_t p1, const float* sq,
                   float* bv, int32_t* bi) {
  for (int64_t r = 0; r < m; r += kRows) {
    TileFn* const tile = kTiles[m - r < kRows ? m - r : kRows];
    for (int64_t p = p0; p < p1; ++p) {
      const int32_t j0 = static_cast<int32_t>(p * kNearestPanelKeys);
      tile(a + r * d, d, panels + p * d * kNearestPanelKeys, sq + j0, j0, bv + r * kNearestPanelKeys,
           bi + r * kNearestPanelKeys);
    }
  }
}

}  // namespace kvserve::cpu::avx512

KVSERVE_AVX512_END
