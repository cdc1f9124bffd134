// The RippleKV plan: per-layer weights r^s from the profile, clipped and rescaled into quotas.
#include "engine/budget/ripple_plan.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kvserve {

std::vector<double> RippleWeights(absl::Span<const double> s, const RippleParams& p) {
  const auto [lo, hi] = std::minmax_element(s.begin(), s.end());
  std::vector<double> w(s.size(), 1.0);
  if (s.empty() || *hi <= *lo) return w;  // no spread: uniform
  for (size_t l = 0; l < s.size(); ++l) {
    const double norm = (s[l] - *lo) / (*hi - *lo);
    w[l] = std::clamp(std::pow(p.r, norm), 1.0 / p.gamma, p.gamma);
  }
  return w;
}

std::vector<int64_t> RippleQuotas(absl::Span<const double> s, const RippleParams& p, int64_t budget_tokens,
                                  int64_t page_size) {
  const size_t L = s.size();
  const std::vector<double> w = RippleWeights(s, p);
  const double mean = std::accumulate(w.begin(), w.end(), 0.0) / static_cast<double>(L);
  const int64_t total_pages = std::max<int64_t>(
      static_cast<int64_t>(L),
      std::llround(static_cast<double>(budget_tokens) * static_cast<double>(L) / static_cast<double>(page_size)));
  // Ideal pages per layer, then floor (at least one) and hand out what is left by largest remainder.
  std::vector<double> ideal(L);
  std::vector<int64_t> pages(L);
  int64_t given = 0;
  for (size_t l = 0; l < L; ++l) {
    ideal[l] = w[l] / mean * static_cast<double>(total_pages) / static_cast<double>(L);
    pages[l] = std::max<int64_t>(1, static_cast<int64_t>(std::floor(ideal[l])));
    given += pages[l];
  }
  std::vector<size_t> order(L);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return ideal[a] - std::floor(ideal[a]) > ideal[b] - std::floor(ideal[b]);
  });
  for (size_t i = 0; given < total_pages; i = (i + 1) % L, ++given) ++pages[order[i]];
  // Layers raised to one page may overshoot; take back from the largest.
  while (given > total_pages) {
    auto big = std::max_element(pages.begin(), pages.end());
    if (*big <= 1) break;
    --*big;
    --given;
  }
  std::vector<int64_t> quotas(L);
  for (size_t l = 0; l < L; ++l) quotas[l] = pages[l] * page_size;
  return quotas;
}

}  // namespace kvserve
