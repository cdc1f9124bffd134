// Confidence intervals for eval cells, so a table says which differences between methods are
// real: Wilson's score interval for an accuracy (well behaved at 0 and 1 and for few
// samples, where the normal approximation gives impossible bounds), and a percentile
// bootstrap of the mean for continuous scores (KL, answer NLL gaps).
#pragma once
#include <cstdint>
#include <vector>

namespace kvserve {

struct Interval {
  double low = 0, high = 0;
};

// 95% Wilson score interval of a proportion with `successes` of `n` (n >= 1).
Interval WilsonInterval(int64_t successes, int64_t n);

// 95% percentile bootstrap interval of the mean of values (2,000 resamples from a fixed
// seed, so a table is reproducible). A single value gives [v, v].
Interval BootstrapMeanInterval(const std::vector<double>& values);

}  // namespace kvserve
