// The two inner loops of CPU attention over one run of keys that are contiguous in a page:
// the logits of a group's query heads, and the probability-weighted sum of values. AVX-512
// when the CPU has it and head_dim is a multiple of 16, AVX2 (the build's x86-64-v3 baseline)
// when it is a multiple of 8, plain loops otherwise (kernel_table.h picks the ISA). Keys
// and values are stored as `type`, kF32 or kF16 (widened as they are loaded); strides count
// elements.
#pragma once
#include <cstdint>

#include "kernels/dtype.h"

namespace kvserve::cpu {

// logits[h * logits_stride + i] = scale * dot(q[h], k[i]) + lw[i * lw_stride] for h < heads,
// i < n. q [heads, hd] contiguous; key i at k + i * k_stride. While key i is read, the bytes
// of it the loop reads are also asked for (prefetched) prefetch_offset bytes further on
// (0: nothing asked for): the caller knows where the keys it reads next are, in whichever page.
void ScoreKeys(const float* q, int64_t heads, const void* k, DType type, int64_t k_stride, int64_t n, int64_t hd,
               float scale, const float* lw, int64_t lw_stride, float* logits, int64_t logits_stride,
               int64_t prefetch_offset = 0);

// acc[h, :] += sum over i < n of p[h * p_stride + i] * v[i] for h < heads. acc [heads, hd]
// contiguous; value i at v + i * v_stride. prefetch_offset as for ScoreKeys.
void AccumulateValues(const float* p, int64_t p_stride, int64_t heads, const void* v, DType type, int64_t v_stride,
                      int64_t n, int64_t hd, float* acc, int64_t prefetch_offset = 0);

// x[i] = exp(x[i] - shift) for i < n; returns their sum. exp(-inf) = 0. Within 2 ulp of
// std::exp for arguments above -87 (where exp is normal); below that the result is 0 or a
// subnormal close to it.
float ExpShiftedSum(float* x, int64_t n, float shift);

}  // namespace kvserve::cpu
