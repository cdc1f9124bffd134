#include "engine/compress/auto_budget.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kvserve {

int64_t AutoBudgetTokens(const CompressibilityEstimate& estimate, double risk, int64_t k_min, int64_t n) {
  int64_t lo = std::clamp<int64_t>(k_min, 1, std::max<int64_t>(1, n)), hi = std::max<int64_t>(1, n);
  if (estimate.RiskAt(hi) > risk) return hi;
  while (lo < hi) {  // invariant: RiskAt(hi) <= risk
    const int64_t mid = lo + (hi - lo) / 2;
    if (estimate.RiskAt(mid) <= risk) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return hi;
}

absl::StatusOr<double> ParseAutoBudget(std::string_view text) {
  // Debian's abseil has its own string_view, so the text goes through std::string.
  const std::string s(text);
  constexpr std::string_view kPrefix = "auto:";
  double risk = 0;
  if (s.rfind(kPrefix, 0) != 0 || !absl::SimpleAtod(s.substr(kPrefix.size()), &risk) || !(risk > 0) ||
      !std::isfinite(risk)) {
    return absl::InvalidArgumentError(absl::StrCat("KV budget '", std::string(text),
                                                   "' is not auto:RISK with RISK > 0 (e.g. auto:0.5)"));
  }
  return risk;
}

}  // namespace kvserve
