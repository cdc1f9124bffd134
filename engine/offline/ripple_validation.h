// Checking a RippleKV profile the way the paper does: compress one layer at a time to a
// small budget, measure the real damage (KL versus the full cache on natural text), and
// rank-correlate it with the profile's sensitivity and with the layer index.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/compress/compression_settings.h"
#include "engine/offline/text_corpus.h"
#include "engine/model/model_weights.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/backend.h"

namespace kvserve {

struct LayerDamageOptions {
  int64_t context = 2048;      // tokens of natural text before the scored continuation
  int64_t continuation = 64;
  int64_t samples = 3;
  int64_t layer_budget = 64;   // tokens the one compressed layer keeps
  std::string policy = "snapkv";
  uint64_t seed = 0;
};

// damage[l]: mean KL(full || only layer l compressed to layer_budget) over the samples.
absl::StatusOr<std::vector<double>> MeasureLayerDamage(const Model& model, const Tokenizer& tokenizer,
                                                       Backend& backend, const TextCorpus& corpus,
                                                       const LayerDamageOptions& options,
                                                       const std::function<void(int64_t)>& progress = {});

// Spearman's rank correlation (ties get their average rank); 0 when either side is constant.
double SpearmanRho(absl::Span<const double> a, absl::Span<const double> b);

}  // namespace kvserve
