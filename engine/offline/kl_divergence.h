// How far a compressed cache moves the next-token distribution: KL(full || compressed),
// computed in double so that tiny divergences are not rounding noise.
#pragma once
#include <cstdint>

#include "absl/types/span.h"

namespace kvserve {

// Mean over rows of KL(softmax(full_row) || softmax(comp_row)) in nats. Both are
// [rows, vocab] logits; identical inputs give exactly 0.
double MeanKlDivergence(absl::Span<const float> full_logits, absl::Span<const float> comp_logits, int64_t vocab);

}  // namespace kvserve
