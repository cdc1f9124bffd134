// Per-layer quotas of one request: explicit ones, the RippleKV plan, or LayerQuotas' splits.
#include "engine/budget/quota_plan.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace kvserve {

absl::Status CheckPlanInputs(const BudgetSpec& spec, int64_t n_layers) {
  if (spec.plan != BudgetPlan::kRipple || !spec.layer_quota.empty()) return absl::OkStatus();
  if (!spec.ripple) {
    return absl::InvalidArgumentError(
        "KV budget plan ripple needs a RippleKV profile (start with --budget-plan ripple:PROFILE.json)");
  }
  if (n_layers > 0 && static_cast<int64_t>(spec.ripple->sensitivity.size()) != n_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("the RippleKV profile has ", spec.ripple->sensitivity.size(), " layers, the model ", n_layers));
  }
  return absl::OkStatus();
}

std::vector<int64_t> QuotasFor(const BudgetSpec& spec, int64_t n_layers, int64_t prompt_len, int64_t page_size) {
  if (!spec.layer_quota.empty()) return {spec.layer_quota.begin(), spec.layer_quota.end()};
  const int64_t tokens = spec.budget <= 1
      ? static_cast<int64_t>(std::floor(spec.budget * static_cast<double>(prompt_len)))
      : static_cast<int64_t>(spec.budget);
  if (spec.plan == BudgetPlan::kRipple && spec.ripple) {
    return RippleQuotas(spec.ripple->sensitivity, spec.ripple_params, std::max<int64_t>(1, tokens), page_size);
  }
  return LayerQuotas(spec.plan, n_layers, prompt_len, std::max<int64_t>(1, tokens), spec.window);
}

}  // namespace kvserve
