// The nearest kept key of each evicted key (--evicted-weight merge): the squared distances of
// an evicted-by-kept block and their argmin in one pass, so the matrix of distances is never
// written out. One distance's products are summed in key order with one FMA each, in every
// form (the plain loop, AVX2, AVX-512), so all of them choose the same key, ties included.
#pragma once
#include <cstdint>

namespace kvserve::cpu {

// Kept keys are read in panels of this many keys: per panel, head_dim rows of 32 floats (the
// keys' element e side by side), the layout the tiled kernels load a row of at a time.
inline constexpr int64_t kNearestPanelKeys = 32;

// Floats of the panels of k keys of d elements (k rounded up to whole panels).
int64_t NearestPanelFloats(int64_t k, int64_t d);

// Packs keys [k, d] (row-major) into panels, and their squared norms (summed in the same order
// as the distances) into sq, both padded to whole panels: padding keys are 0 with a squared
// norm of +inf, so they are never nearest. panels: NearestPanelFloats(k, d); sq: k rounded up.
void PackNearestPanels(const float* keys, int64_t k, int64_t d, float* panels, float* sq);

// For each of the m rows of a (row-major [m, d]), the first j < k with the smallest
// sq[j] - 2 a.key_j (its squared distance to key j less ||a||^2), as a scan with a strict <
// finds it: NaN never wins, and with nothing below +inf the answer is 0. Single-threaded
// (callers split the rows). Runs the active ISA's kernel.
void NearestKeys(const float* a, int64_t m, int64_t d, const float* panels, const float* sq, int64_t k, int64_t* out);

// The same by the plain loop over keys: the tiled kernels' reference, equal to them exactly.
void NearestKeysPlain(const float* a, int64_t m, int64_t d, const float* panels, const float* sq, int64_t k,
                      int64_t* out);

}  // namespace kvserve::cpu
