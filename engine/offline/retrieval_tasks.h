// RULER-style synthetic retrieval tasks: passkey (niah_single: one number in noise),
// multikey (niah_multikey: several "special magic numbers", one asked for) and multivalue
// (niah_multivalue: one key holding several numbers, all asked for), each built to an exact
// token count and reproducible from a seed.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/offline/eval_sample.h"
#include "engine/offline/haystack.h"
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

// A needle depth drawn uniformly from [0.05, 0.95).
double RandomNeedleDepth(SampleRng& rng);

// n random digits, the first non-zero.
std::string RandomDigits(SampleRng& rng, int n);

// Frames the prompt, then fills what is left of r.context_tokens with noise holding the
// needles; answers are left for the caller. task names the task in errors.
absl::StatusOr<EvalSample> AssembleRetrievalSample(const Tokenizer& tokenizer, const TokenizerSpec& spec,
                                                   const RetrievalSpec& r, const RetrievalPrompt& prompt,
                                                   const std::vector<Needle>& needles, std::string_view task);

// "The pass key is NNNNN. Remember it. NNNNN is the pass key." at depth 10%..90% (spread
// over the samples), asked for at the end. answer: the 5 digits.
absl::StatusOr<EvalSample> BuildPasskeySample(const Tokenizer& tokenizer, const TokenizerSpec& spec,
                                              const RetrievalSpec& r);

// Four needles "One of the special magic numbers for WORD is: NNNNNNN." with distinct words
// at random depths; the question names one word. answer: its 7 digits.
absl::StatusOr<EvalSample> BuildMultikeySample(const Tokenizer& tokenizer, const TokenizerSpec& spec,
                                               const RetrievalSpec& r);

// Two needles "One of the special magic numbers for WORD is: NNNNNNN." with the same word at
// random depths; the question asks for all of them. answers: both values (right when the
// greedy answer contains both, in any order); answer_tokens list them in text order.
absl::StatusOr<EvalSample> BuildMultivalueSample(const Tokenizer& tokenizer, const TokenizerSpec& spec,
                                                 const RetrievalSpec& r);

}  // namespace kvserve
