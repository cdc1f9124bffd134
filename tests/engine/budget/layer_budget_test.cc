// Per-layer budget plans: PyramidKV's linear split (kvpress's formula) keeps the mean,
// decreases with depth, and falls back to uniform where kvpress does.
#include "engine/budget/layer_budget.h"

#include <numeric>

#include "gtest/gtest.h"

namespace kvserve {
namespace {

TEST(LayerBudgetTest, UniformGivesEveryLayerTheBudget) {
  EXPECT_EQ(LayerQuotas(BudgetPlan::kUniform, 4, 1000, 100, 64), (std::vector<int64_t>{100, 100, 100, 100}));
}

TEST(LayerBudgetTest, PyramidDecreasesWithDepthAndKeepsTheTotal) {
  const int64_t L = 30, B = 200;
  const std::vector<int64_t> q = LayerQuotas(BudgetPlan::kPyramid, L, 2000, B, 64);
  // min = B / 20 = 10, max = 2B - min = 390.
  EXPECT_EQ(q.front(), 390);
  EXPECT_EQ(q.back(), 10);
  EXPECT_TRUE(std::is_sorted(q.rbegin(), q.rend()));
  const int64_t total = std::accumulate(q.begin(), q.end(), int64_t{0});
  EXPECT_NEAR(static_cast<double>(total), static_cast<double>(L * B), L / 2.0);
}

TEST(LayerBudgetTest, PyramidFallsBackToUniformWhenThePromptIsShorterThanTheTopLayer) {
  // max = 2 * 600 - 30 = 1170 > 1000 prompt tokens.
  EXPECT_EQ(LayerQuotas(BudgetPlan::kPyramid, 8, 1000, 600, 64), std::vector<int64_t>(8, 600));
}

TEST(LayerBudgetTest, ParsesPlanNamesAndNamesABadOne) {
  EXPECT_EQ(*ParseBudgetPlan("pyramid"), BudgetPlan::kPyramid);
  const auto bad = ParseBudgetPlan("ripple2");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("ripple2"), std::string_view::npos);
}

}  // namespace
}  // namespace kvserve
