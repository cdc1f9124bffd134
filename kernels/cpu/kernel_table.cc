// The per-ISA kernel tables and the process-wide choice between them.
#include "kernels/cpu/kernel_table.h"

#include <atomic>

namespace kvserve::cpu {
namespace {

constexpr CpuKernels kAvx2Kernels{CpuIsa::kAvx2, 64,       avx2::QuantDot,         avx2::QuantDotRows,
                                  avx2::QuantDotRowsTokens, avx2::QuantDotRowTilesTokens, 4, avx2::ScoreKeys,    avx2::AccumulateValues,
                                  avx2::ExpShiftedSum, avx2::NearestPanels};
constexpr CpuKernels kAvx512Kernels{CpuIsa::kAvx512, 64,       avx512::QuantDot,         avx512::QuantDotRows,
                                    avx512::QuantDotRowsTokens, avx512::QuantDotRowTilesTokens, 3, avx512::ScoreKeys,    avx512::AccumulateValues,
                                    avx512::ExpShiftedSum, avx512::NearestPanels};

std::atomic<const CpuKernels*>& Active() {
  static std::atomic<const CpuKernels*> active{&KernelsFor(ChooseCpuIsa())};
  return active;
}

}  // namespace

const CpuKernels& KernelsFor(CpuIsa isa) { return isa == CpuIsa::kAvx512 ? kAvx512Kernels : kAvx2Kernels; }

const CpuKernels& ActiveKernels() { return *Active().load(std::memory_order_relaxed); }

ScopedCpuIsa::ScopedCpuIsa(CpuIsa isa) : previous_(Active().exchange(&KernelsFor(isa))) {}
ScopedCpuIsa::~ScopedCpuIsa() { Active().store(previous_); }

}  // namespace kvserve::cpu
