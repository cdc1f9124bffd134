// The RippleKV profiler: per-layer KL when one layer's value cache is perturbed.
#include "engine/offline/ripple_profiler.h"

#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "engine/compress/kv_policy.h"
#include "engine/offline/kl_divergence.h"
#include "engine/kv/page_pool.h"
#include "engine/model/forward.h"

namespace kvserve {
namespace {

// Adds noise of std scale * RMS(head) to every cached value of layer l's first `slots`
// slots; returns the original values so they can be put back.
std::vector<float> PerturbValues(PagePool& pool, const SequenceKv& seq, int64_t l, int64_t slots, double scale,
                                 uint64_t seed) {
  const LayerKv L{pool.view(), seq.layer_pages[l], slots};
  const int64_t H = L.kv.n_kv_heads, d = L.kv.head_dim;
  std::vector<float> saved(static_cast<size_t>(slots * H * d));
  for (int64_t s = 0; s < slots; ++s) {
    for (int64_t h = 0; h < H; ++h) L.Value(s, h, saved.data() + (s * H + h) * d);
  }
  auto at = [&](int64_t s, int64_t h) { return saved.data() + (s * H + h) * d; };
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0.0, 1.0);
  std::vector<float> v(static_cast<size_t>(d));
  for (int64_t h = 0; h < H; ++h) {
    double sq = 0;
    for (int64_t s = 0; s < slots; ++s) {
      for (int64_t e = 0; e < d; ++e) sq += static_cast<double>(at(s, h)[e]) * at(s, h)[e];
    }
    const double sigma = scale * std::sqrt(sq / static_cast<double>(slots * d));
    for (int64_t s = 0; s < slots; ++s) {
      for (int64_t e = 0; e < d; ++e) v[e] = at(s, h)[e] + static_cast<float>(sigma * noise(rng));
      WriteKvRow(L.kv, L.kv.v, L.Offset(s, h), v.data());
    }
  }
  return saved;
}

void RestoreValues(PagePool& pool, const SequenceKv& seq, int64_t l, int64_t slots, const std::vector<float>& saved) {
  const LayerKv L{pool.view(), seq.layer_pages[l], slots};
  const int64_t H = L.kv.n_kv_heads, d = L.kv.head_dim;
  for (int64_t s = 0; s < slots; ++s) {
    for (int64_t h = 0; h < H; ++h) WriteKvRow(L.kv, L.kv.v, L.Offset(s, h), saved.data() + (s * H + h) * d);
  }
}

}  // namespace

absl::StatusOr<std::vector<double>> MeasureLayerSensitivity(const Model& model, Backend& backend,
                                                            absl::Span<const std::vector<int32_t>> samples,
                                                            const ProfilerOptions& o,
                                                            const std::function<void(int64_t)>& progress) {
  const ModelConfig& c = model.config;
  if (samples.empty()) return absl::InvalidArgumentError("the profiler needs at least one calibration sample");
  if (o.scored_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat("scored tokens must be >= 1, got ", o.scored_tokens));
  }
  if (!(o.perturbation_scale > 0) || !std::isfinite(o.perturbation_scale)) {
    return absl::InvalidArgumentError(absl::StrCat("perturbation scale must be > 0, got ", o.perturbation_scale));
  }
  std::vector<double> s(static_cast<size_t>(c.n_layers), 0.0);
  for (size_t i = 0; i < samples.size(); ++i) {
    const std::vector<int32_t>& tokens = samples[i];
    const int64_t n = static_cast<int64_t>(tokens.size()), ctx = n - o.scored_tokens;
    if (ctx < 1) {
      return absl::InvalidArgumentError(absl::StrCat("calibration sample ", i, " has ", n,
                                                     " tokens; it needs more than the ", o.scored_tokens,
                                                     " scored tokens"));
    }
    const int64_t ps = 16;
    PagePool pool({(n + ps - 1) / ps * c.n_layers, ps, c.n_kv_heads, c.head_dim});
    SequenceKv seq(c.n_layers);
    LlamaForward fwd(model, backend, pool);
    std::vector<float> logits, ref;
    for (int64_t pos = 0; pos < ctx; pos += o.prefill_chunk) {
      logits.clear();
      ForwardRequest req{absl::MakeConstSpan(tokens).subspan(pos, std::min(o.prefill_chunk, ctx - pos)), pos, &seq,
                         false};
      if (absl::Status st = fwd.Step({&req, 1}, &logits); !st.ok()) return st;
    }
    const auto scored = absl::MakeConstSpan(tokens).subspan(ctx);
    auto run_scored = [&](std::vector<float>* out) {
      out->clear();
      ForwardRequest req{scored, ctx, &seq, true};
      absl::Status st = fwd.Step({&req, 1}, out);
      for (int64_t l = 0; l < c.n_layers; ++l) seq.TruncateLayer(pool, l, ctx);  // back to the context
      return st;
    };
    if (absl::Status st = run_scored(&ref); !st.ok()) return st;
    for (int64_t l = 0; l < c.n_layers; ++l) {
      const uint64_t seed = o.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(i) * 1000003ull + static_cast<uint64_t>(l);
      const std::vector<float> saved = PerturbValues(pool, seq, l, ctx, o.perturbation_scale, seed);
      if (absl::Status st = run_scored(&logits); !st.ok()) return st;
      RestoreValues(pool, seq, l, ctx, saved);
      s[l] += MeanKlDivergence(ref, logits, c.vocab_size) / static_cast<double>(samples.size());
    }
    seq.Release(pool);
    if (progress) progress(static_cast<int64_t>(i));
  }
  return s;
}

}  // namespace kvserve
