// Run-time dispatch of the CPU kernels that exist per ISA (cpu_isa.h): one table of function
// pointers per ISA, one of them chosen once per process. The public entry points
// (QuantDot/QuantDotRows in quant_dot.h, ScoreKeys/AccumulateValues/ExpShiftedSum in
// attention_dots.h) call through the active table; tests and benchmarks call each table.
#pragma once
#include <cstdint>

#include "kernels/cpu/cpu_isa.h"
#include "kernels/dtype.h"

namespace kvserve::cpu {

// Signatures and contracts as documented in quant_dot.h and attention_dots.h.
using QuantDotFn = float(DType w, const void* w_row, const void* act_row, int64_t n);
using QuantDotRowsFn = void(DType w, const uint8_t* w_rows, int64_t row_bytes, int64_t n_rows, const void* act_row,
                            int64_t n, float* out, int64_t out_stride);
using QuantDotRowsTokensFn = void(DType w, const uint8_t* w_rows, int64_t row_bytes, int64_t n_rows,
                                  const uint8_t* act_rows, int64_t act_row_bytes, int64_t n_tokens, int64_t n, float* out,
                                  int64_t out_token_stride);
using ScoreKeysFn = void(const float* q, int64_t heads, const void* k, DType type, int64_t k_stride, int64_t n,
                         int64_t hd, float scale, const float* lw, int64_t lw_stride, float* logits,
                         int64_t logits_stride, int64_t prefetch_offset);
using AccumulateValuesFn = void(const float* p, int64_t p_stride, int64_t heads, const void* v, DType type,
                                int64_t v_stride, int64_t n, int64_t hd, float* acc, int64_t prefetch_offset);
using ExpShiftedSumFn = float(float* x, int64_t n, float shift);
// NearestKeys's (nearest_keys.h) inner kernel: rows [m, d] of a over panels p0..p1-1, each
// row's 32 lanes updated (bv: lane l's first smallest value so far among keys j = l mod 32,
// bi: that key); bv, bi are [m, 32], begun at +inf and 0.
using NearestPanelsFn = void(const float* a, int64_t m, int64_t d, const float* panels, int64_t p0, int64_t p1,
                             const float* sq, float* bv, int32_t* bi);

struct CpuKernels {
  CpuIsa isa;
  int64_t quant_dot_max_tokens;  // matmul.h's QuantDotMaxTokens(): where sgemm takes over
  QuantDotFn* quant_dot;
  QuantDotRowsFn* quant_dot_rows;
  QuantDotRowsTokensFn* quant_dot_rows_tokens;
  // Faster for many tokens but not bit-equal to quant_dot_rows per token (so never under
  // --deterministic); from quant_dot_tile_min_tokens tokens on. nullptr where there is none.
  QuantDotRowsTokensFn* quant_dot_tile_tokens;
  int64_t quant_dot_tile_min_tokens;
  ScoreKeysFn* score_keys;
  AccumulateValuesFn* accumulate_values;
  ExpShiftedSumFn* exp_shifted_sum;
  NearestPanelsFn* nearest_panels;  // nearest_keys.h
};

// The table of `isa` (whether or not this CPU can run it: check CpuSupports first).
const CpuKernels& KernelsFor(CpuIsa isa);

// The table the kernels use: ChooseCpuIsa()'s on first use, or a ScopedCpuIsa's.
const CpuKernels& ActiveKernels();

// Makes `isa`'s table the active one for its lifetime, for tests and benchmarks that run
// both ISAs in one process. Construct and destroy it while no kernel runs on another thread.
class ScopedCpuIsa {
 public:
  explicit ScopedCpuIsa(CpuIsa isa);
  ~ScopedCpuIsa();
  ScopedCpuIsa(const ScopedCpuIsa&) = delete;
  ScopedCpuIsa& operator=(const ScopedCpuIsa&) = delete;

 private:
  const CpuKernels* previous_;
};

// Each ISA's implementations: avx2 in quant_dot.cc and attention_dots.cc (the build's
// baseline flags), avx512 in quant_dot_avx512.cc and attention_dots_avx512.cc.
namespace avx2 {
QuantDotFn QuantDot;
QuantDotRowsFn QuantDotRows;
QuantDotRowsTokensFn QuantDotRowsTokens;
QuantDotRowsTokensFn QuantDotRowTilesTokens;  // quant_dot_tile_avx2.cc
ScoreKeysFn ScoreKeys;
AccumulateValuesFn AccumulateValues;
ExpShiftedSumFn ExpShiftedSum;
NearestPanelsFn NearestPanels;  // nearest_keys.cc
}  // namespace avx2
namespace avx512 {
QuantDotFn QuantDot;
QuantDotRowsFn QuantDotRows;
QuantDotRowsTokensFn QuantDotRowsTokens;
QuantDotRowsTokensFn QuantDotRowTilesTokens;  // quant_dot_tile_avx512.cc
ScoreKeysFn ScoreKeys;
AccumulateValuesFn AccumulateValues;
ExpShiftedSumFn ExpShiftedSum;
NearestPanelsFn NearestPanels;  // nearest_keys_avx512.cc
}  // namespace avx512

}  // namespace kvserve::cpu
