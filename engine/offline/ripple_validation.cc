// RippleKV validation: real per-layer compression damage, rank-correlated with a profile.
#include "engine/offline/ripple_validation.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "engine/offline/cache_evaluator.h"

namespace kvserve {
namespace {

std::vector<double> Ranks(absl::Span<const double> v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> rank(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    const double avg = (static_cast<double>(i) + static_cast<double>(j)) / 2.0 + 1.0;
    for (size_t k = i; k <= j; ++k) rank[order[k]] = avg;
    i = j + 1;
  }
  return rank;
}

}  // namespace

double SpearmanRho(absl::Span<const double> a, absl::Span<const double> b) {
  const std::vector<double> ra = Ranks(a), rb = Ranks(b);
  const double n = static_cast<double>(ra.size());
  if (n < 2) return 0.0;
  const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / n;
  const double mb = std::accumulate(rb.begin(), rb.end(), 0.0) / n;
  double cov = 0, va = 0, vb = 0;
  for (size_t i = 0; i < ra.size(); ++i) {
    cov += (ra[i] - ma) * (rb[i] - mb);
    va += (ra[i] - ma) * (ra[i] - ma);
    vb += (rb[i] - mb) * (rb[i] - mb);
  }
  return va == 0 || vb == 0 ? 0.0 : cov / std::sqrt(va * vb);
}

absl::StatusOr<std::vector<double>> MeasureLayerDamage(const Model& model, const Tokenizer& tokenizer,
                                                       Backend& backend, const TextCorpus& corpus,
                                                       const LayerDamageOptions& o,
                                                       const std::function<void(int64_t)>& progress) {
  const int64_t L = model.config.n_layers;
  if (o.layer_budget < 1 || o.layer_budget >= o.context) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer budget must be in [1, context ", o.context, "), got ", o.layer_budget));
  }
  CompressionSettings base;
  base.policy = o.policy;
  CacheEvaluatorOptions eo;
  eo.max_context = o.context;
  eo.max_extra = o.continuation;
  eo.window = base.window;
  CacheEvaluator evaluator(model, tokenizer, backend, eo);
  std::vector<double> damage(static_cast<size_t>(L), 0.0);
  for (int64_t i = 0; i < o.samples; ++i) {
    absl::StatusOr<EvalSample> sample = corpus.Sample(o.context, o.continuation, i, o.seed);
    if (!sample.ok()) return sample.status();
    if (absl::Status st = evaluator.Prefill(*sample); !st.ok()) return st;
    for (int64_t l = 0; l < L; ++l) {
      // Every other layer's quota exceeds the context, so only layer l is compressed.
      CompressionSettings s = base;
      s.layer_quota.assign(static_cast<size_t>(L), o.context + o.continuation + 1);
      s.layer_quota[l] = o.layer_budget;
      absl::StatusOr<EvalScore> kl = evaluator.Score(s);
      if (!kl.ok()) return kl.status();
      damage[l] += kl->value / static_cast<double>(o.samples);
    }
    if (progress) progress(i);
  }
  return damage;
}

}  // namespace kvserve
