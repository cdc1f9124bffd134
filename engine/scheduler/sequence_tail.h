// What one sequence does with the logits of its step: sample the next token, check EOS, stop
// tokens, stop sequences and the length limit, turn tokens into text that is safe to show,
// and attach log-probabilities. The scheduler owns one per running request; a single
// `generate` is a one-request scheduler run, so this is the only such loop.
#pragma once
#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "engine/model/sampler.h"
#include "engine/tokenizer/stop_matcher.h"
#include "engine/tokenizer/streaming_detokenizer.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/scheduler/request.h"

namespace kvserve {

// `token`'s log-probability and the top_n best (ties to the lower id) from one row of raw logits.
TokenLogprob LogprobOf(absl::Span<const float> logits, int32_t token, int32_t top_n);
// Fills e->logprob and e->top_logprobs (top_n best) from one row of raw logits.
void TokenLogprobs(absl::Span<const float> logits, int32_t token, int32_t top_n, StreamEvent* e);
// Prompt scoring: row j of `rows` ([next_tokens.size() or more, vocab]) is the prediction
// after some prompt position p + j; appends next_tokens[j]'s (the token at p + j + 1) logprob.
void AppendPromptLogprobs(absl::Span<const float> rows, int64_t vocab, absl::Span<const int32_t> next_tokens,
                          int32_t top_n, std::vector<TokenLogprob>* out);

class SequenceTail {
 public:
  // r's sampling, stop and output fields are read; r and tokenizer outlive this.
  SequenceTail(const EngineRequest& r, const Tokenizer& tokenizer);

  // The events the logits after the last cached token produce: a token event (none on EOS),
  // then, when the request ends here, its final event (finished, with the reason and the
  // text still held back). Usage fields are the caller's to fill.
  std::vector<StreamEvent> Next(absl::Span<const float> logits);

  // Prompt, then generated tokens: what the cache holds or will hold next.
  const std::vector<int32_t>& history() const { return history_; }
  int32_t generated() const { return generated_; }

 private:
  StreamEvent TokenEvent(int32_t token, std::string text, absl::Span<const float> logits) const;
  // The final event; flush: release the text the detokenizer and stop matcher still hold
  // (a stop sequence found there makes the reason kStopSequence).
  StreamEvent FinalEvent(FinishReason reason, bool flush);

  const EngineRequest& request_;
  const Tokenizer& tokenizer_;
  Sampler sampler_;
  StopMatcher stops_;
  StreamingDetokenizer detok_;
  std::vector<int32_t> history_;  // also the sampler's penalty window
  int32_t generated_ = 0;
};

}  // namespace kvserve
