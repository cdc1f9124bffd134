// Confidence intervals of eval cells: Wilson for accuracies, bootstrap for continuous scores.
#include "engine/offline/eval_stats.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace kvserve {

Interval WilsonInterval(int64_t successes, int64_t n) {
  constexpr double z = 1.959963984540054;  // the normal 97.5% quantile
  const double nn = static_cast<double>(n), p = static_cast<double>(successes) / nn, z2 = z * z;
  const double center = (p + z2 / (2 * nn)) / (1 + z2 / nn);
  const double half = z / (1 + z2 / nn) * std::sqrt(p * (1 - p) / nn + z2 / (4 * nn * nn));
  // All (none) right: the end is exactly 1 (0); the closed form can land a rounding error short
  // (10 of 10: 0.9999999999999999), and the quality scripts compare accuracies against it.
  return {successes == 0 ? 0.0 : std::max(0.0, center - half), successes == n ? 1.0 : std::min(1.0, center + half)};
}

Interval BootstrapMeanInterval(const std::vector<double>& values) {
  constexpr int kResamples = 2000;
  const size_t n = values.size();
  if (n == 0) return {};
  std::mt19937_64 rng(0x5eed);
  std::uniform_int_distribution<size_t> pick(0, n - 1);
  std::vector<double> means(kResamples);
  for (double& m : means) {
    double sum = 0;
    for (size_t i = 0; i < n; ++i) sum += values[pick(rng)];
    m = sum / static_cast<double>(n);
  }
  std::sort(means.begin(), means.end());
  // The 2.5th and 97.5th percentiles, by the nearest rank.
  return {means[static_cast<size_t>(0.025 * kResamples)], means[static_cast<size_t>(0.975 * kResamples) - 1]};
}

}  // namespace kvserve
