// CPU feature detection for the kernel dispatch (kernel_table.h).
#include "kernels/cpu/cpu_isa.h"

#include <cpuid.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace kvserve::cpu {

std::string_view CpuIsaName(CpuIsa isa) { return isa == CpuIsa::kAvx512 ? "avx512" : "avx2"; }

std::optional<CpuIsa> ParseCpuIsa(std::string_view name) {
  for (CpuIsa isa : kAllCpuIsas) {
    if (name == CpuIsaName(isa)) return isa;
  }
  return std::nullopt;
}

// F16C from CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports does not know "f16c".
bool HasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
}

bool CpuSupports(CpuIsa isa) {
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && HasF16c();
  if (isa == CpuIsa::kAvx2) return avx2;
  return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vnni");
}

CpuIsa ChooseCpuIsa() {
  const CpuIsa best = CpuSupports(CpuIsa::kAvx512) ? CpuIsa::kAvx512 : CpuIsa::kAvx2;
  const char* forced = std::getenv("KVSERVE_CPU_ISA");
  if (forced == nullptr || *forced == '\0') return best;
  const std::optional<CpuIsa> isa = ParseCpuIsa(forced);
  if (!isa) {
    std::fprintf(stderr, "kvserve: KVSERVE_CPU_ISA must be avx2 or avx512, got '%s'; using %s\n", forced,
                 std::string(CpuIsaName(best)).c_str());
    return best;
  }
  if (!CpuSupports(*isa)) {
    std::fprintf(stderr, "kvserve: KVSERVE_CPU_ISA=%s: this CPU does not support it; using %s\n", forced,
                 std::string(CpuIsaName(best)).c_str());
    return best;
  }
  return *isa;
}

}  // namespace kvserve::cpu
