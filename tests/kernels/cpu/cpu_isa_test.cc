// The run-time choice of kernel ISA: KVSERVE_CPU_ISA forces one this CPU supports, anything
// else falls back to the best one; each table says which ISA it holds.
#include "kernels/cpu/cpu_isa.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include "kernels/cpu/kernel_table.h"

namespace kvserve::cpu {
namespace {

class ChooseCpuIsaTest : public ::testing::Test {
 protected:
  void TearDown() override { unsetenv("KVSERVE_CPU_ISA"); }
  static CpuIsa Best() { return CpuSupports(CpuIsa::kAvx512) ? CpuIsa::kAvx512 : CpuIsa::kAvx2; }
};

TEST_F(ChooseCpuIsaTest, BestSupportedByDefault) {
  unsetenv("KVSERVE_CPU_ISA");
  EXPECT_EQ(ChooseCpuIsa(), Best());
  EXPECT_TRUE(CpuSupports(CpuIsa::kAvx2));  // the build's baseline: tests run only where it holds
}

TEST_F(ChooseCpuIsaTest, EnvironmentForcesTheBaseline) {
  setenv("KVSERVE_CPU_ISA", "avx2", 1);
  EXPECT_EQ(ChooseCpuIsa(), CpuIsa::kAvx2);
}

TEST_F(ChooseCpuIsaTest, EnvironmentForcesAvx512OnlyWhereSupported) {
  setenv("KVSERVE_CPU_ISA", "avx512", 1);
  EXPECT_EQ(ChooseCpuIsa(), CpuSupports(CpuIsa::kAvx512) ? CpuIsa::kAvx512 : CpuIsa::kAvx2);
}

TEST_F(ChooseCpuIsaTest, UnknownNameFallsBackToBest) {
  setenv("KVSERVE_CPU_ISA", "sse2", 1);
  EXPECT_EQ(ChooseCpuIsa(), Best());
}

TEST(CpuIsaTest, NamesRoundTrip) {
  for (CpuIsa isa : kAllCpuIsas) {
    EXPECT_EQ(ParseCpuIsa(CpuIsaName(isa)), isa);
    EXPECT_EQ(KernelsFor(isa).isa, isa);
  }
  EXPECT_EQ(ParseCpuIsa("AVX2"), std::nullopt);
}

TEST(CpuIsaTest, ScopedCpuIsaSwitchesTheActiveTableAndRestoresIt) {
  const CpuIsa before = ActiveKernels().isa;
  {
    ScopedCpuIsa use(CpuIsa::kAvx2);
    EXPECT_EQ(ActiveKernels().isa, CpuIsa::kAvx2);
  }
  EXPECT_EQ(ActiveKernels().isa, before);
}

}  // namespace
}  // namespace kvserve::cpu
