// A RULER-style haystack: repeated noise sentences with needles at chosen depths, built to
// an exact token count.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tokenizer/tokenizer.h"

namespace kvserve {

struct Needle {
  std::string text;    // inserted as a sentence; starts with a space
  double depth = 0.5;  // where in the haystack, 0 = first, 1 = last
};

// The noise RULER repeats ("The grass is green. The sky is blue. ...").
const std::vector<std::string>& NoiseSentences();

// Exactly n_tokens tokens: noise sentences in order (each tokenized on its own, so sentence
// boundaries are token boundaries), the last one cut to fit, and each needle placed at the
// sentence boundary nearest its depth. INVALID_ARGUMENT when the needles alone do not fit.
absl::StatusOr<std::vector<int32_t>> BuildHaystack(const Tokenizer& tokenizer, int64_t n_tokens,
                                                   const std::vector<Needle>& needles);

}  // namespace kvserve
