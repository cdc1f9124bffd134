// The RippleKV budget plan: layers that the profile found sensitive keep more pages,
// tolerant ones fewer, under the same global budget.
#pragma once
#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace kvserve {

struct RippleParams {
  double r = 8.0;      // disparity: the most sensitive layer's weight is r times the least's
  double gamma = 4.0;  // weights are clipped to [1/gamma, gamma] before rescaling
};

// Per-layer weights: s normalized to [0, 1], w_l = r^{s_l}, clipped to [1/gamma, gamma].
std::vector<double> RippleWeights(absl::Span<const double> sensitivity, const RippleParams& params);

// Tokens per layer: budgets w_l * B / mean(w) (summing to L * B), rounded to whole pages by
// largest remainder so the page total is round(L * B / page_size); every layer keeps at
// least one page.
std::vector<int64_t> RippleQuotas(absl::Span<const double> sensitivity, const RippleParams& params,
                                  int64_t budget_tokens, int64_t page_size);

}  // namespace kvserve
