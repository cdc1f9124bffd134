// --kv-budget auto:RISK: a per-request budget picked from the prompt's compressibility
// estimate instead of fixed by the caller. Easy contexts (entries whose responses spread in
// few directions) get few entries; hard ones (a table of unrelated keys) get many.
#pragma once
#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/compress/compressibility.h"

namespace kvserve {

// The smallest per-layer token count k in [k_min, n] whose estimated risk
// (CompressibilityEstimate::RiskAt: the share of the value variance k entries leave
// unexplained) is at most `risk`; n when none is. RiskAt never rises with k, so this is a
// binary search. k_min is capped at n.
int64_t AutoBudgetTokens(const CompressibilityEstimate& estimate, double risk, int64_t k_min, int64_t n);

// "auto:0.5" -> 0.5. INVALID_ARGUMENT naming the text when it is not auto:R with R > 0.
absl::StatusOr<double> ParseAutoBudget(std::string_view text);

}  // namespace kvserve
