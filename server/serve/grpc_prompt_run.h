// One prompt's life on the server, shared by the unary and streaming handlers: when it
// arrived, when its first token came, what it produced, and what it reports at the end
// (the Completion message and the per-request metrics). Not thread-safe: the owning
// reactor guards it with its mutex.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/scheduler/request.h"
#include "kvserve/v1/generation.pb.h"
#include "server/serve/metrics.h"

namespace kvserve {

class PromptRun {
 public:
  using Clock = std::chrono::steady_clock;

  PromptRun(Clock::time_point arrival, int64_t prompt_tokens, std::string kv_policy, int64_t n_layers);

  void MarkSubmitted() { submitted_ = Clock::now(); }
  // A non-final event: a token and/or text. Also appended to the caller's pending output.
  void OnToken(const StreamEvent& e);
  // The final event: fills `out` (finish reason, error, usage, timings, prompt logprobs; token
  // ids and text when with_output) and reports the request to `metrics`.
  void Finish(const StreamEvent& e, bool with_output, ServerMetrics& metrics, v1::Completion* out);

  bool finished() const { return finished_; }
  int64_t generated() const { return static_cast<int64_t>(tokens_.size()); }

 private:
  void KeepPromptLogprobs(const StreamEvent& e);

  Clock::time_point arrival_, submitted_, first_token_, last_token_;
  int64_t prompt_tokens_;
  std::string kv_policy_;
  int64_t n_layers_;
  std::vector<int32_t> tokens_;
  std::vector<v1::TokenLogprobs> logprobs_;  // one per token when the request asked for them
  std::vector<v1::TokenLogprobs> prompt_logprobs_;  // until Finish puts them in the Completion
  std::string text_;
  bool finished_ = false;
};

v1::FinishReason ToProtoFinishReason(FinishReason r);

// The event's token logprobs as the API reports them; false when the event carries none.
bool ToProtoLogprobs(const StreamEvent& e, v1::TokenLogprobs* out);

}  // namespace kvserve
