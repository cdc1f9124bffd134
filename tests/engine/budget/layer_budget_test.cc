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

TEST(LayerBudgetTest, PyramidMatchesKvpressOnSmolLM2Shapes) {
  // kvpress 0.5.5 on a 600-token prompt at compression ratio 0.5 (B = 300, 30 layers):
  // 536, 520, 503, ..., 80, 64, summing to 9000.
  const std::vector<int64_t> q = LayerQuotas(BudgetPlan::kPyramid, 30, 600, 300, 64);
  EXPECT_EQ(q[0], 536);
  EXPECT_EQ(q[1], 520);
  EXPECT_EQ(q[2], 503);
  EXPECT_EQ(q[28], 80);
  EXPECT_EQ(q[29], 64);
  EXPECT_TRUE(std::is_sorted(q.rbegin(), q.rend()));
  EXPECT_EQ(std::accumulate(q.begin(), q.end(), int64_t{0}), 9000);
}

TEST(LayerBudgetTest, PyramidIsUniformWhenTheTopLayerWouldKeepLessThanTheWindow) {
  // B = 120: min = 6 < 64, so kvpress falls back to the uniform budget.
  EXPECT_EQ(LayerQuotas(BudgetPlan::kPyramid, 30, 600, 120, 64), std::vector<int64_t>(30, 120));
  // Long prompt, large budget: min = 2000 / 20 = 100 >= 64, max = 3900.
  const std::vector<int64_t> q = LayerQuotas(BudgetPlan::kPyramid, 4, 20000, 2000, 64);
  EXPECT_EQ(q, (std::vector<int64_t>{3900, 2633, 1367, 100}));
}

TEST(LayerBudgetTest, ParsesPlanNamesAndNamesABadOne) {
  EXPECT_EQ(*ParseBudgetPlan("pyramid"), BudgetPlan::kPyramid);
  const auto bad = ParseBudgetPlan("ripple2");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("ripple2"), std::string_view::npos);
}

}  // namespace
}  // namespace kvserve
