// What a client hands the engine (EngineRequest), how it is checked (ValidateRequest), what
// it gets back, token by token, through its sink (StreamEvent), and how a full queue says so.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "engine/compress/compressibility.h"
#include "engine/compress/compression_settings.h"
#include "engine/compress/kv_settings.h"
#include "engine/compress/sequence_compressor.h"
#include "engine/model/model_weights.h"
#include "engine/model/sampling_params.h"

namespace kvserve {

using RequestHandle = uint64_t;

// RESOURCE_EXHAUSTED for backpressure (the waiting queue is full; the same request may fit
// later), told apart from a request that can never fit by a status payload, never by its text.
absl::Status QueueFullError(const std::string& message);
bool IsQueueFull(const absl::Status& st);

enum class FinishReason { kLength, kEos, kStopSequence, kStopToken };

// One token's log-probability under the model's distribution (log-softmax of the raw
// logits, before sampling parameters) and the most likely (token, log-probability) pairs,
// best first.
struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;
};
std::string_view FinishReasonName(FinishReason r);

struct StreamEvent {
  int32_t token = -1;      // the generated id; -1 on the final event
  std::string text;        // text that became safe to show with this event (may be empty)
  bool finished = false;   // the last event of the request
  FinishReason finish_reason = FinishReason::kLength;  // valid when finished and status ok
  absl::Status status;     // CANCELLED after Abort, another error if the step failed
  // With EngineRequest::top_logprobs > 0, on token events: the token's log-probability under
  // the model's distribution (log-softmax of the raw logits, before sampling parameters),
  // and the top_logprobs most likely (token, log-probability) pairs, best first.
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top_logprobs;
  // With EngineRequest::prompt_logprobs, on the first event after the prompt is read (the
  // first token event, or the final one when no token comes): for each prompt token i >= 1,
  // its log-probability given tokens 0..i-1 and that position's prompt_logprobs most likely
  // tokens (token 0 has none, so prompt length - 1 entries). They are what the engine
  // computed while prefilling: with chunk-mode compression, a later chunk saw the cache
  // compressed after the earlier ones.
  std::vector<TokenLogprob> prompt_logprobs;
  // On the final event: what the request's KV cache cost. Filled by the scheduler.
  int64_t kv_tokens_kept = 0;      // KV entries (summed over layers) held at the end
  int64_t kv_entries_evicted = 0;  // KV slots (summed over layers) dropped by compression
  int64_t peak_kv_bytes = 0;       // most KV bytes the request held at once
  double queue_seconds = 0;        // from Submit until admission (pages reserved)
  // How compressible the prompt's cache looked (empty without compression): per layer and
  // mean trace, effective rank and spectral tail of the response-profile covariance.
  CompressibilityEstimate kv_compressibility;
  // Tokens per layer the request's compression kept to, averaged over layers (what auto:RISK
  // picked, or the fixed budget's quotas; 0 without compression), and the estimate's risk
  // at that budget (CompressibilityEstimate::RiskAt).
  double kv_mean_quota = 0;
  double kv_estimated_risk = 0;
  CompressionStats kv_compression;  // compactions, evictions and their time (zero without)
  // With EngineRequest::keep_logits: the raw logits the event's token was sampled from (on
  // the final event too when the request ended on EOS).
  std::vector<float> logits;
};

// Called on the engine thread (never while the engine holds its lock, so it may Submit or
// Abort); it should return quickly because the next step waits for it.
using RequestSink = std::function<void(const StreamEvent&)>;

struct EngineRequest {
  std::vector<int32_t> prompt;
  int32_t max_new_tokens = 128;
  SamplingParams sampling;
  std::vector<std::string> stop_sequences;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  int32_t top_logprobs = 0;              // > 0: token events carry logprobs (see StreamEvent)
  // Set: score the prompt (StreamEvent::prompt_logprobs) with this many alternatives per
  // token. Prefill then computes logits for every prompt position, not only the last (a
  // chunk's rows x vocab floats for the step, nothing kept beyond the figures). Then
  // max_new_tokens may be 0: the request ends once the prompt is read (finish reason length).
  std::optional<int32_t> prompt_logprobs;
  bool keep_logits = false;              // token events carry the raw logits (tests, goldens)
  // KV compression: what the request sets over the server-wide defaults (SchedulerConfig).
  KvSettings kv;
  // Chat prompts: the tokens of the last user turn and the generation prompt (0 otherwise).
  // With kv.question_tokens unset, a span of at most kMaxChatQuestionTokens is the question
  // chunk-mode scoring probes with; a longer one (a document in the last turn) falls back to
  // the last `window` tokens (ResolveKvSettings).
  int64_t chat_question_tokens = 0;
  RequestSink sink;
};

// What a request is checked against: the limits the server or the CLI runs with.
struct RequestLimits {
  int64_t max_context = 0;  // prompt + max_new_tokens
  int64_t page_size = 16;
  int64_t prefill_chunk = 512;
};

// Checks a request's own fields against the model and the limits; the message names the bad
// value. Its KV settings are checked once they are resolved (Scheduler::Submit).
absl::Status ValidateRequest(const Model& model, const EngineRequest& r, const RequestLimits& limits);

}  // namespace kvserve
