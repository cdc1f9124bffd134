// The prefetch level's run-time choice: KVSERVE_PREFETCH_KV_LEVEL / _WEIGHT_LEVEL name one of
// nta, l1, l2; anything else keeps the default (the CPU's), so a typo cannot change behaviour.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string_view>

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

TEST(PrefetchLevelTest, TheBackendReportsTheLevelInUse) {
  EXPECT_EQ(CpuKvPrefetchLevel(), std::string_view(PrefetchLevelName(kv_prefetch_level)));
}

}  // namespace
}  // namespace kvserve::cpu
