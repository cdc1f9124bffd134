// RULER-style synthetic retrieval tasks: passkey (niah_single: one number in noise) and
// multikey (niah_multikey: several "special magic numbers", one asked for), each built to
// an exact token count and reproducible from a seed.
#pragma once
#include <cstdint>

#include "absl/status/statusor.h"
#include "engine/offline/eval_sample.h"
#include "engine/offline/prompt_frame.h"
#include "engine/tokenizer/tokenizer.h"

namespace kvserve {

struct RetrievalSpec {
  int64_t context_tokens = 0;  // the prompt's exact length, question included
  int64_t sample = 0;          // 0-based; passkey depths spread over samples
  int64_t n_samples = 1;
  uint64_t seed = 0;
  PromptStyle style = PromptStyle::kPlain;
};

// "The pass key is NNNNN. Remember it. NNNNN is the pass key." at depth 10%..90% (spread
// over the samples), asked for at the end. answer: the 5 digits.
absl::StatusOr<EvalSample> BuildPasskeySample(const Tokenizer& tokenizer, const TokenizerSpec& spec,
                                              const RetrievalSpec& r);

// Four needles "One of the special magic numbers for WORD is: NNNNNNN." with distinct words
// at random depths; the question names one word. answer: its 7 digits.
absl::StatusOr<EvalSample> BuildMultikeySample(const Tokenizer& tokenizer, const TokenizerSpec& spec,
                                               const RetrievalSpec& r);

}  // namespace kvserve
