#include "engine/scheduler/request.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace kvserve {

namespace {
constexpr char kQueueFullPayload[] = "type.kvserve.dev/kvserve.QueueFull";
}  // namespace

absl::Status QueueFullError(const std::string& message) {
  absl::Status st = absl::ResourceExhaustedError(message);
  st.SetPayload(kQueueFullPayload, absl::Cord());
  return st;
}

bool IsQueueFull(const absl::Status& st) {
  return st.code() == absl::StatusCode::kResourceExhausted && st.GetPayload(kQueueFullPayload).has_value();
}

std::string_view FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kLength: return "length";
    case FinishReason::kEos: return "eos";
    case FinishReason::kStopSequence: return "stop_sequence";
    case FinishReason::kStopToken: return "stop_token";
  }
  return "?";
}

absl::Status ValidateRequest(const Model& model, const EngineRequest& r, const RequestLimits& limits) {
  const int64_t vocab = model.config.vocab_size;
  const int64_t prompt_len = static_cast<int64_t>(r.prompt.size());
  if (r.prompt.empty()) return absl::InvalidArgumentError("prompt is empty");
  if (r.max_new_tokens < (r.prompt_logprobs ? 0 : 1)) {
    return absl::InvalidArgumentError(absl::StrCat("max_new_tokens must be >= 1 (0 only with prompt_logprobs), got ",
                                                   r.max_new_tokens));
  }
  if (prompt_len > limits.max_context) {
    return absl::InvalidArgumentError(
        absl::StrCat("prompt has ", prompt_len, " tokens, the context limit is ", limits.max_context));
  }
  const int64_t total = prompt_len + r.max_new_tokens;
  if (total > limits.max_context) {
    return absl::InvalidArgumentError(absl::StrCat("prompt (", prompt_len, " tokens) + max_new_tokens (",
                                                   r.max_new_tokens, ") = ", total, " exceeds the context limit ",
                                                   limits.max_context));
  }
  if (limits.page_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("page_size must be >= 1, got ", limits.page_size));
  }
  if (limits.prefill_chunk < 1) {
    return absl::InvalidArgumentError(absl::StrCat("prefill_chunk must be >= 1, got ", limits.prefill_chunk));
  }
  for (int32_t id : r.stop_token_ids) {
    if (id < 0 || id >= vocab) {
      return absl::InvalidArgumentError(absl::StrCat("stop token id ", id, " is outside [0, ", vocab, ")"));
    }
  }
  if (absl::Status st = ValidateSamplingParams(r.sampling, static_cast<int32_t>(vocab)); !st.ok()) return st;
  for (int32_t t : r.prompt) {
    if (t < 0 || t >= vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("prompt token id ", t, " is outside the vocabulary [0, ", vocab, ")"));
    }
  }
  if (r.top_logprobs < 0 || r.top_logprobs > vocab) {
    return absl::InvalidArgumentError(
        absl::StrCat("top_logprobs must be in [0, ", vocab, "], got ", r.top_logprobs));
  }
  if (r.prompt_logprobs && (*r.prompt_logprobs < 0 || *r.prompt_logprobs > vocab)) {
    return absl::InvalidArgumentError(
        absl::StrCat("prompt_logprobs must be in [0, ", vocab, "], got ", *r.prompt_logprobs));
  }
  return absl::OkStatus();
}

}  // namespace kvserve
