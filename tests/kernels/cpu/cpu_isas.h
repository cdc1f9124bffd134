// The kernel ISAs this machine can run, for tests that check every dispatched path.
#pragma once
#include <string>
#include <vector>

#include "kernels/cpu/cpu_isa.h"

namespace kvserve::testing {

inline std::vector<cpu::CpuIsa> IsasThisCpuRuns() {
  std::vector<cpu::CpuIsa> isas;
  for (cpu::CpuIsa isa : cpu::kAllCpuIsas) {
    if (cpu::CpuSupports(isa)) isas.push_back(isa);
  }
  return isas;
}

inline std::string IsaTrace(cpu::CpuIsa isa) { return "cpu isa " + std::string(cpu::CpuIsaName(isa)); }

}  // namespace kvserve::testing
