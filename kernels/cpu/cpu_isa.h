// Which vector ISA the CPU kernels run with. The build's baseline is AVX2 (x86-64-v3); the
// AVX-512 kernels are compiled alongside and chosen at run time on CPUs that have them.
#pragma once
#include <optional>
#include <string_view>

namespace kvserve::cpu {

enum class CpuIsa {
  kAvx2,    // x86-64-v3: AVX2, FMA, F16C — every machine kvserve runs on
  kAvx512,  // AVX-512 F/BW/VL/DQ with VNNI (int8 dots in one instruction)
};
inline constexpr CpuIsa kAllCpuIsas[] = {CpuIsa::kAvx2, CpuIsa::kAvx512};

std::string_view CpuIsaName(CpuIsa isa);
std::optional<CpuIsa> ParseCpuIsa(std::string_view name);

// Whether this CPU can run kernels of `isa`.
bool CpuSupports(CpuIsa isa);

// The best ISA this CPU supports, unless the environment variable KVSERVE_CPU_ISA=avx2|avx512
// names another (to compare the two on one machine, or to test the baseline on a newer CPU);
// a value that is unknown or unsupported here is reported on stderr and ignored.
CpuIsa ChooseCpuIsa();

}  // namespace kvserve::cpu
