// KL(full || compressed) of next-token distributions, in double.
#include "engine/offline/kl_divergence.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <vector>

namespace kvserve {
namespace {

void LogSoftmax(const float* x, int64_t n, std::vector<double>* out) {
  out->resize(static_cast<size_t>(n));
  const double mx = *std::max_element(x, x + n);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(x[i]) - mx);
  const double log_z = mx + std::log(sum);
  for (int64_t i = 0; i < n; ++i) (*out)[i] = static_cast<double>(x[i]) - log_z;
}

}  // namespace

double MeanKlDivergence(absl::Span<const float> full_logits, absl::Span<const float> comp_logits, int64_t vocab) {
  assert(full_logits.size() == comp_logits.size() && vocab > 0);
  const int64_t rows = static_cast<int64_t>(full_logits.size()) / vocab;
  if (rows == 0) return 0;
  std::vector<double> lp, lq;
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    LogSoftmax(full_logits.data() + r * vocab, vocab, &lp);
    LogSoftmax(comp_logits.data() + r * vocab, vocab, &lq);
    double kl = 0;
    for (int64_t i = 0; i < vocab; ++i) kl += std::exp(lp[i]) * (lp[i] - lq[i]);
    total += kl;
  }
  return total / static_cast<double>(rows);
}

}  // namespace kvserve
