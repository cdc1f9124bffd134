// A request's budget resolved to per-layer quotas: the global budget split by its plan, or
// explicit quotas; and what a plan needs of the model before it can run.
#pragma once
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "engine/budget/layer_budget.h"
#include "engine/budget/ripple_plan.h"
#include "engine/budget/ripple_profile.h"

namespace kvserve {

// What QuotasFor reads (a view: the quotas and the profile outlive it).
struct BudgetSpec {
  double budget = 0.2;                    // fraction of the prompt (<= 1) or tokens per layer (> 1)
  BudgetPlan plan = BudgetPlan::kUniform;
  absl::Span<const int64_t> layer_quota;  // explicit tokens per layer; overrides budget and plan
  const RippleProfile* ripple = nullptr;  // plan kRipple
  RippleParams ripple_params;
  int64_t window = 64;                    // the observation window the selection keeps
};

// What the plan needs: ripple needs a profile made for a model of
// n_layers layers (n_layers <= 0: not checked). INVALID_ARGUMENT naming the problem.
absl::Status CheckPlanInputs(const BudgetSpec& spec, int64_t n_layers);

// Tokens each layer keeps for a prompt of prompt_len tokens (ripple quotas are whole pages).
std::vector<int64_t> QuotasFor(const BudgetSpec& spec, int64_t n_layers, int64_t prompt_len, int64_t page_size);

}  // namespace kvserve
