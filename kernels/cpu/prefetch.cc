// The cache level of the CPU kernels' software prefetch (prefetch.h), chosen once per process.
#include "kernels/cpu/prefetch.h"

#include <cpuid.h>

#include <cstdio>
#include <string_view>

namespace kvserve::cpu {
namespace {

// AMD's family number (CPUID leaf 1: base family, plus the extended family when the base is
// 0xF), or 0 on other vendors: Zen 2 is 0x17, Zen 3 and Zen 4 0x19, Zen 5 0x1A.
unsigned AmdFamily() {
  __builtin_cpu_init();
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__builtin_cpu_is("amd") || !__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0;
  const unsigned base = (eax >> 8) & 0xF;
  return base == 0xF ? base + ((eax >> 20) & 0xFF) : base;
}

// K/V rows into L2 on AMD from family 0x19 on (measured on Zen 4, where NTA's lines were likely
// gone from L1 before they were read), NTA elsewhere (measured on Zen 2; no other core measured).
PrefetchLevel DefaultKvLevel() { return AmdFamily() >= 0x19 ? PrefetchLevel::kL2 : PrefetchLevel::kNta; }

}  // namespace

const char* PrefetchLevelName(PrefetchLevel level) {
  switch (level) {
    case PrefetchLevel::kL1:
      return "l1";
    case PrefetchLevel::kL2:
      return "l2";
    case PrefetchLevel::kNta:
      break;
  }
  return "nta";
}

PrefetchLevel PrefetchLevelFromEnv(const char* name, PrefetchLevel fallback) {
  const char* env = std::getenv(name);
  if (env == nullptr || *env == '\0') return fallback;
  for (const PrefetchLevel level : {PrefetchLevel::kNta, PrefetchLevel::kL1, PrefetchLevel::kL2}) {
    if (std::string_view(env) == PrefetchLevelName(level)) return level;
  }
  std::fprintf(stderr, "kvserve: %s must be nta, l1 or l2, got '%s'; using the default\n", name, env);
  return fallback;
}

const PrefetchLevel kv_prefetch_level = PrefetchLevelFromEnv("KVSERVE_PREFETCH_KV_LEVEL", DefaultKvLevel());
const PrefetchLevel weight_prefetch_level = PrefetchLevelFromEnv("KVSERVE_PREFETCH_WEIGHT_LEVEL", PrefetchLevel::kNta);

}  // namespace kvserve::cpu
