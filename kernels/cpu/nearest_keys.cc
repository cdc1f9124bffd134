// Packing, the plain loop, the dispatch, and the AVX2 kernel of NearestKeys (nearest_keys.h);
// the AVX-512 kernel is in nearest_keys_avx512.cc.
#include "kernels/cpu/nearest_keys.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/kernel_table.h"

namespace kvserve::cpu {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

int64_t PaddedKeys(int64_t k) { return (k + kNearestPanelKeys - 1) / kNearestPanelKeys * kNearestPanelKeys; }

// Key j's element 0 in the panels; its element e is kNearestPanelKeys * e floats further.
template <typename T>
T* PanelColumn(T* panels, int64_t j, int64_t d) {
  return panels + (j / kNearestPanelKeys) * d * kNearestPanelKeys + j % kNearestPanelKeys;
}

}  // namespace

int64_t NearestPanelFloats(int64_t k, int64_t d) { return PaddedKeys(k) * d; }

void PackNearestPanels(const float* keys, int64_t k, int64_t d, float* panels, float* sq) {
  const int64_t padded = PaddedKeys(k);
  for (int64_t j = 0; j < padded; ++j) {
    float* col = PanelColumn(panels, j, d);
    float s = 0;
    for (int64_t e = 0; e < d; ++e) {
      const float x = j < k ? keys[j * d + e] : 0.0f;
      col[e * kNearestPanelKeys] = x;
      s = std::fma(x, x, s);
    }
    sq[j] = j < k ? s : kInf;
  }
}

void NearestKeysPlain(const float* a, int64_t m, int64_t d, const float* panels, const float* sq, int64_t k,
                      int64_t* out) {
  for (int64_t r = 0; r < m; ++r) {
    int64_t to = 0;
    float best = kInf;
    for (int64_t j = 0; j < k; ++j) {
      const float* col = PanelColumn(panels, j, d);
      float dot = 0;
      for (int64_t e = 0; e < d; ++e) dot = std::fma(a[r * d + e], col[e * kNearestPanelKeys], dot);
      const float v = std::fma(-2.0f, dot, sq[j]);
      if (v < best) {
        best = v;
        to = j;
      }
    }
    out[r] = to;
  }
}

// Panels in chunks of 256 KB, which stay in L2 while every row passes over them; then each
// row's first smallest of its lanes, the lower key on equal values.
void NearestKeys(const float* a, int64_t m, int64_t d, const float* panels, const float* sq, int64_t k, int64_t* out) {
  std::vector<float> bv(static_cast<size_t>(m * kNearestPanelKeys), kInf);
  std::vector<int32_t> bi(static_cast<size_t>(m * kNearestPanelKeys), 0);
  const int64_t n_panels = PaddedKeys(k) / kNearestPanelKeys;
  const int64_t chunk = std::max<int64_t>(1, (int64_t{1} << 16) / (kNearestPanelKeys * std::max<int64_t>(d, 1)));
  NearestPanelsFn* const kernel = ActiveKernels().nearest_panels;
  for (int64_t p0 = 0; p0 < n_panels; p0 += chunk) {
    kernel(a, m, d, panels, p0, std::min(n_panels, p0 + chunk), sq, bv.data(), bi.data());
  }
  for (int64_t r = 0; r < m; ++r) {
    const float* v = &bv[r * kNearestPanelKeys];
    const int32_t* i = &bi[r * kNearestPanelKeys];
    float best = kInf;
    int32_t to = 0;
    for (int64_t l = 0; l < kNearestPanelKeys; ++l) {
      if (v[l] < best || (v[l] == best && i[l] < to)) {
        best = v[l];
        to = i[l];
      }
    }
    out[r] = to;
  }
}

namespace avx2 {
namespace {

// R rows of a against one panel: 32 dots per row in four registers, then each lane's first
// smallest value so far (bv, with its key index in bi; 32 per row) updated.
template <int R>
void PanelTile(const float* a, int64_t d, const float* panel, const float* sq, int32_t j0, float* bv, int32_t* bi) {
  __m256 acc[R][4];
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < 4; ++c) acc[r][c] = _mm256_setzero_ps();
  }
  for (int64_t e = 0; e < d; ++e) {
    const float* p = panel + e * kNearestPanelKeys;
    __m256 b0 = _mm256_loadu_ps(p), b1 = _mm256_loadu_ps(p + 8), b2 = _mm256_loadu_ps(p + 16),
           b3 = _mm256_loadu_ps(p + 24);
    // Keeps the panel row in registers: GCC would otherwise fold the loads into every FMA,
    // ten loads per eight FMAs, and the loop would wait on the load ports, not on the FMAs.
    asm("" : "+x"(b0), "+x"(b1), "+x"(b2), "+x"(b3));
    for (int r = 0; r < R; ++r) {
      const __m256 x = _mm256_broadcast_ss(a + r * d + e);
      acc[r][0] = _mm256_fmadd_ps(x, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(x, b1, acc[r][1]);
      acc[r][2] = _mm256_fmadd_ps(x, b2, acc[r][2]);
      acc[r][3] = _mm256_fmadd_ps(x, b3, acc[r][3]);
    }
  }
  const __m256 minus2 = _mm256_set1_ps(-2.0f);
  for (int c = 0; c < 4; ++c) {
    const __m256 s = _mm256_loadu_ps(sq + c * 8);
    const __m256i idx = _mm256_add_epi32(_mm256_set1_epi32(j0 + c * 8), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    for (int r = 0; r < R; ++r) {
      float* v_at = bv + r * kNearestPanelKeys + c * 8;
      auto* i_at = reinterpret_cast<__m256i*>(bi + r * kNearestPanelKeys + c * 8);
      const __m256 v = _mm256_fmadd_ps(minus2, acc[r][c], s), cur = _mm256_loadu_ps(v_at);
      const __m256 lt = _mm256_cmp_ps(v, cur, _CMP_LT_OQ);
      _mm256_storeu_ps(v_at, _mm256_blendv_ps(cur, v, lt));
      const __m256 ci = _mm256_castsi256_ps(_mm256_loadu_si256(i_at));
      _mm256_storeu_si256(i_at, _mm256_castps_si256(_mm256_blendv_ps(ci, _mm256_castsi256_ps(idx), lt)));
    }
  }
}

}  // namespace

// Rows two at a time: eight accumulators and four panel registers, within AVX2's sixteen.
void NearestPanels(const float* a, int64_t m, int64_t d, const float* panels, int64_t p0, int64_t p1, const float* sq,
                   float* bv, int32_t* bi) {
  for (int64_t r = 0; r < m; r += 2) {
    auto* const tile = r + 2 <= m ? PanelTile<2> : PanelTile<1>;
    for (int64_t p = p0; p < p1; ++p) {
      const int32_t j0 = static_cast<int32_t>(p * kNearestPanelKeys);
      tile(a + r * d, d, panels + p * d * kNearestPanelKeys, sq + j0, j0, bv + r * kNearestPanelKeys,
           bi + r * kNearestPanelKeys);
    }
  }
}

}  // namespace avx2

}  // namespace kvserve::cpu
