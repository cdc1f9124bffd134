// Per-layer budget plans: the uniform and PyramidKV splits of a global KV budget into quotas.
#include "engine/budget/layer_budget.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kvserve {

namespace {
constexpr std::string_view kPlanNames[] = {"uniform", "pyramid", "ripple"};  // BudgetPlan's order
}  // namespace

absl::Span<const std::string_view> BudgetPlanNames() { return kPlanNames; }

absl::StatusOr<BudgetPlan> ParseBudgetPlan(std::string_view name) {
  for (size_t i = 0; i < std::size(kPlanNames); ++i) {
    if (name == kPlanNames[i]) return static_cast<BudgetPlan>(i);
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown KV budget plan '", std::string(name), "' (expected ",
                                                 absl::StrJoin(kPlanNames, ", ",
                                                               [](std::string* out, std::string_view n) {
                                                                 out->append(n);
                                                               }),
                                                 ")"));
}

std::string_view BudgetPlanName(BudgetPlan plan) { return kPlanNames[static_cast<size_t>(plan)]; }

int64_t PyramidLayerBudget(int64_t layer, int64_t n_layers, int64_t prompt_len, int64_t budget_tokens,
                           int64_t window, double beta) {
  // kvpress writes it with capacity = window + B and subtracts the window again.
  const double b = static_cast<double>(budget_tokens), w = static_cast<double>(window);
  const double p = static_cast<double>(prompt_len);
  double min_num = b / beta;
  double max_num = b * 2 - min_num;
  if (max_num >= p - w) {
    // The bottom layer cannot keep more than the prompt outside the window.
    max_num = p - w;
    min_num = b * 2 - max_num;
  }
  if (n_layers < 2 || !(p >= max_num && max_num >= min_num && min_num >= w)) return budget_tokens;
  const double steps = (max_num - min_num) / static_cast<double>(n_layers - 1);
  // nearbyint rounds half to even, as Python's round() does in kvpress.
  return static_cast<int64_t>(std::nearbyint(max_num - static_cast<double>(layer) * steps));
}

std::vector<int64_t> LayerQuotas(BudgetPlan plan, int64_t n_layers, int64_t prompt_len, int64_t budget_tokens,
                                 int64_t window, double beta) {
  std::vector<int64_t> q(static_cast<size_t>(n_layers), budget_tokens);
  if (plan == BudgetPlan::kPyramid) {
    for (int64_t l = 0; l < n_layers; ++l) q[l] = PyramidLayerBudget(l, n_layers, prompt_len, budget_tokens, window, beta);
  }
  for (int64_t& v : q) v = std::max<int64_t>(1, v);
  return q;
}

}  // namespace kvserve
