// Per-layer budget plans: how a global KV budget (tokens per layer on average) is split
// into per-layer quotas. Uniform gives every layer the same; PyramidKV gives the lower
// layers more and the upper layers less, linearly (kvpress's formula, beta = 20).
// The RippleKV profile plugs in here as a third plan.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace kvserve {

enum class BudgetPlan { kUniform, kPyramid, kRipple };

// The one table of plan names: "uniform", "pyramid", "ripple", in BudgetPlan's order.
absl::Span<const std::string_view> BudgetPlanNames();
// A name of BudgetPlanNames(); the error names the value.
absl::StatusOr<BudgetPlan> ParseBudgetPlan(std::string_view name);
std::string_view BudgetPlanName(BudgetPlan plan);

// Tokens per layer (each >= 1) for a prompt of prompt_len tokens and a mean budget of
// budget_tokens per layer. window is the observation window the selection keeps. The
// ripple plan needs a profile (see ripple_plan.h); here it falls back to uniform.
std::vector<int64_t> LayerQuotas(BudgetPlan plan, int64_t n_layers, int64_t prompt_len, int64_t budget_tokens,
                                 int64_t window, double beta = 20.0);

// PyramidKV's quota of one layer (kvpress PyramidKVPress.get_layer_budget): with
// B = budget_tokens, min = B / beta and max = 2B - min (max capped at prompt_len - window,
// min then 2B - max), layer l keeps round(max - l (max - min) / (n_layers - 1)). Unless
// prompt_len >= max >= min >= window it falls back to B for every layer, so small budgets
// are uniform, exactly as in kvpress.
int64_t PyramidLayerBudget(int64_t layer, int64_t n_layers, int64_t prompt_len, int64_t budget_tokens,
                           int64_t window, double beta);

}  // namespace kvserve
