// The intervals eval prints next to every figure.
#include "engine/offline/eval_stats.h"

#include "gtest/gtest.h"

namespace kvserve {
namespace {

TEST(EvalStatsTest, WilsonIntervalMatchesTheClosedForm) {
  // 45 of 50: p = 0.9, the textbook interval [0.786, 0.957].
  const Interval a = WilsonInterval(45, 50);
  EXPECT_NEAR(a.low, 0.7864, 5e-4);
  EXPECT_NEAR(a.high, 0.9565, 5e-4);
  // At the edges it stays inside [0, 1] and is not empty (the normal approximation's is).
  const Interval none = WilsonInterval(0, 2), all = WilsonInterval(50, 50);
  EXPECT_EQ(none.low, 0.0);
  EXPECT_NEAR(none.high, 0.6576, 5e-4);
  EXPECT_NEAR(all.low, 0.9287, 5e-4);
  EXPECT_NEAR(all.high, 1.0, 1e-12);
  // All or none right ends exactly at 1 or 0 for every n (the closed form gives
  // 0.9999999999999999 at 10 of 10, which read as "above" an interval ending at 1).
  for (int64_t n = 1; n <= 200; ++n) {
    EXPECT_EQ(WilsonInterval(n, n).high, 1.0) << n;
    EXPECT_EQ(WilsonInterval(0, n).low, 0.0) << n;
  }
  // More samples, a narrower interval at the same rate.
  EXPECT_LT(WilsonInterval(90, 100).high - WilsonInterval(90, 100).low, a.high - a.low);
}

TEST(EvalStatsTest, BootstrapIntervalCoversTheMeanAndShrinksWithSamples) {
  std::vector<double> few = {0.1, 0.3, 0.2, 0.5}, many;
  for (int i = 0; i < 100; ++i) many.push_back(few[i % 4]);
  const Interval a = BootstrapMeanInterval(few), b = BootstrapMeanInterval(many);
  EXPECT_LE(a.low, 0.275);
  EXPECT_GE(a.high, 0.275);
  EXPECT_GE(a.low, 0.1);
  EXPECT_LE(a.high, 0.5);
  EXPECT_LT(b.high - b.low, a.high - a.low);
  EXPECT_EQ(BootstrapMeanInterval({0.25}).low, 0.25);
  EXPECT_EQ(BootstrapMeanInterval({0.25}).high, 0.25);
  // Reproducible: the same values give the same interval.
  EXPECT_EQ(BootstrapMeanInterval(few).low, a.low);
}

}  // namespace
}  // namespace kvserve
