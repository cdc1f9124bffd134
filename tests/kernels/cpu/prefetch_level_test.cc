// The prefetch level's run-time choice: KVSERVE_PREFETCH_KV_LEVEL / _WEIGHT_LEVEL name one of
// nta, l1, l2; anything else keeps the default (the CPU's), so a typo cannot change behaviour;
// and the defaults each CPU vendor gets.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <string_view>
#include <utility>

#include "kernels/backend.h"
#include "kernels/cpu/prefetch.h"

namespace kvserve::cpu {
namespace {

constexpr char kVar[] = "KVSERVE_TEST_PREFETCH_LEVEL";

class PrefetchLevelFromEnvTest : public ::testing::Test {
 protected:
  void TearDown() override { unsetenv(kVar); }
};

TEST_F(PrefetchLevelFromEnvTest, EachNameSelectsItsLevel) {
  for (const PrefetchLevel level : {PrefetchLevel::kNta, PrefetchLevel::kL1, PrefetchLevel::kL2}) {
    setenv(kVar, PrefetchLevelName(level), 1);
    for (const PrefetchLevel fallback : {PrefetchLevel::kNta, PrefetchLevel::kL2}) {
      EXPECT_EQ(PrefetchLevelFromEnv(kVar, fallback), level) << PrefetchLevelName(level);
    }
  }
}

TEST_F(PrefetchLevelFromEnvTest, UnsetEmptyOrUnknownKeepsTheDefault) {
  unsetenv(kVar);
  EXPECT_EQ(PrefetchLevelFromEnv(kVar, PrefetchLevel::kL2), PrefetchLevel::kL2);
  setenv(kVar, "", 1);
  EXPECT_EQ(PrefetchLevelFromEnv(kVar, PrefetchLevel::kNta), PrefetchLevel::kNta);
  for (const char* bad : {"t1", "L2", "l3", "2"}) {  // the hint's name, the wrong case, no such level
    setenv(kVar, bad, 1);
    EXPECT_EQ(PrefetchLevelFromEnv(kVar, PrefetchLevel::kL2), PrefetchLevel::kL2) << bad;
  }
}

TEST(PrefetchLevelTest, TheBackendReportsTheLevelsInUse) {
  EXPECT_EQ(CpuKvPrefetchLevel(), std::string_view(PrefetchLevelName(kv_prefetch_level)));
  EXPECT_EQ(CpuWeightPrefetch(),
            std::string(PrefetchLevelName(weight_prefetch_level)) + "/" + std::to_string(weight_prefetch_bytes));
}

// Each vendor gets what was measured on its cores (prefetch.cc): NTA lost by about half on an
// Intel Xeon, so Intel must never fall through to the NTA of Zen 2 and unmeasured CPUs.
TEST(PrefetchDefaultsTest, EachMeasuredCpuGetsItsOwnLevels) {
  const PrefetchDefaults intel = PrefetchDefaultsFor("GenuineIntel", 6);
  EXPECT_EQ(intel.weight_level, PrefetchLevel::kL1);
  EXPECT_EQ(intel.kv_level, PrefetchLevel::kL2);
  EXPECT_EQ(intel.weight_bytes, 8640);
  for (const unsigned zen3_on : {0x19u, 0x1Au}) {
    const PrefetchDefaults amd = PrefetchDefaultsFor("AuthenticAMD", zen3_on);
    EXPECT_EQ(amd.kv_level, PrefetchLevel::kL2) << zen3_on;
    EXPECT_EQ(amd.weight_level, PrefetchLevel::kNta) << zen3_on;
    EXPECT_EQ(amd.weight_bytes, 2880) << zen3_on;
  }
  // Zen 2, another vendor's name for family 0x19, and an unknown CPU: NTA for both streams.
  for (const auto& [vendor, family] : {std::pair<const char*, unsigned>{"AuthenticAMD", 0x17},
                                       {"HygonGenuine", 0x18}, {"", 0}, {"GenuineIotel", 6}}) {
    const PrefetchDefaults other = PrefetchDefaultsFor(vendor, family);
    EXPECT_EQ(other.kv_level, PrefetchLevel::kNta) << vendor;
    EXPECT_EQ(other.weight_level, PrefetchLevel::kNta) << vendor;
    EXPECT_EQ(other.weight_bytes, 2880) << vendor;
  }
}

}  // namespace
}  // namespace kvserve::cpu
