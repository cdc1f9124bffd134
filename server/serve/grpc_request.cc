// Validation and conversion of GenerateRequest. Every check here exists so that a bad
// request is answered with a precise INVALID_ARGUMENT instead of reaching the engine.
#include "server/serve/grpc_request.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/compress/kv_settings.h"
#include "engine/tokenizer/chat_question.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/model/sampling_params.h"

namespace kvserve {

namespace {

constexpr size_t kMaxRequestIdBytes = 256;
constexpr int kMaxStopSequences = 64;
constexpr uint32_t kMaxTopLogprobs = 20;

absl::Status Bad(auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); }

bool OneOf(const std::string& v, std::initializer_list<const char*> allowed) {
  return std::any_of(allowed.begin(), allowed.end(), [&](const char* a) { return v == a; });
}

// A prompt's tokens, and for chat messages how many of them the last user turn and the
// generation prompt take (0 otherwise): the question chunk-mode scoring probes with.
struct PromptTokenization {
  std::vector<int32_t> tokens;
  int64_t chat_question_tokens = 0;
};

// Tokens of prompt i; the field names in errors are those of the proto.
absl::StatusOr<PromptTokenization> PromptTokens(const ServeContext& ctx, const v1::Prompt& p, int i) {
  const std::string field = absl::StrCat("prompts[", i, "]");
  const int given = !p.text().empty() + (p.token_ids_size() > 0) + (p.messages_size() > 0);
  if (given == 0) return Bad(field, " is empty: set one of text, token_ids or messages");
  if (given > 1) return Bad(field, " sets more than one of text, token_ids and messages; set exactly one");
  const int64_t vocab = ctx.model.config.vocab_size;
  if (p.token_ids_size() > 0) {
    for (int j = 0; j < p.token_ids_size(); ++j) {
      const int32_t t = p.token_ids(j);
      if (t < 0 || t >= vocab) {
        return Bad(field, ".token_ids[", j, "] = ", t, " is outside the vocabulary [0, ", vocab, ")");
      }
    }
    return PromptTokenization{std::vector<int32_t>(p.token_ids().begin(), p.token_ids().end())};
  }
  if (p.messages_size() == 0) return PromptTokenization{ctx.tokenizer.Encode(p.text(), ctx.tokenizer.add_bos(), true)};
  absl::StatusOr<std::string> rendered = RenderMessages(ctx, p.messages(), field + ".messages");
  if (!rendered.ok()) return rendered.status();
  PromptTokenization out{ctx.tokenizer.Encode(*rendered, ctx.tokenizer.add_bos(), /*parse_special=*/true)};
  std::vector<ChatMessage> msgs;
  for (const v1::ChatMessage& m : p.messages()) msgs.push_back({m.role(), m.content()});
  out.chat_question_tokens = LastUserTurnTokens(ctx.tokenizer, ctx.model.tokenizer, msgs,
                                                 static_cast<int64_t>(out.tokens.size()));
  return out;
}

absl::StatusOr<SamplingParams> Sampling(const ServeContext& ctx, const v1::SamplingParams& s) {
  SamplingParams p;
  p.temperature = s.temperature();
  p.top_k = s.top_k();
  p.top_p = s.has_top_p() ? s.top_p() : 1.0f;
  p.min_p = s.min_p();
  p.repetition_penalty = s.has_repetition_penalty() ? s.repetition_penalty() : 1.0f;
  p.presence_penalty = s.presence_penalty();
  p.frequency_penalty = s.frequency_penalty();
  p.seed = s.seed();
  // Its messages read "sampling: top_p must be in (0, 1], got 2": field and value.
  if (absl::Status st = ValidateSamplingParams(p, static_cast<int32_t>(ctx.model.config.vocab_size)); !st.ok()) {
    return st;
  }
  return p;
}

// The request's kv.* fields, typed: an unset field (an empty string, an absent optional, no
// layer_budgets) is left to the server's default. Errors name the proto field.
absl::StatusOr<KvSettings> KvSettingsFromProto(const v1::KvCacheParams& p, int64_t n_layers) {
  constexpr KvSource kProto = KvSource::kProto;
  KvSettings kv;
  if (!p.policy().empty()) {
    absl::StatusOr<std::string> policy = ParseKvPolicy(p.policy(), kProto);
    if (!policy.ok()) return policy.status();
    kv.policy = *std::move(policy);
  }
  if (p.has_budget()) kv.budget = p.budget();
  if (p.has_budget_auto_risk()) kv.auto_risk = p.budget_auto_risk();
  if (!p.budget_plan().empty()) {
    absl::StatusOr<BudgetPlan> plan = ParseKvBudgetPlan(p.budget_plan(), kProto);
    if (!plan.ok()) return plan.status();
    kv.plan = *plan;
  }
  if (p.layer_budgets_size() > 0) kv.layer_quota.emplace(p.layer_budgets().begin(), p.layer_budgets().end());
  if (!p.compress_at().empty()) {
    absl::StatusOr<CompressAt> at = ParseCompressAt(p.compress_at(), kProto);
    if (!at.ok()) return at.status();
    kv.compress_at = *at;
  }
  if (!p.chunk_scoring().empty()) {
    absl::StatusOr<ChunkScoring> scoring = ParseChunkScoring(p.chunk_scoring(), kProto);
    if (!scoring.ok()) return scoring.status();
    kv.chunk_scoring = *scoring;
  }
  if (!p.evicted_weight().empty()) {
    absl::StatusOr<EvictedWeight> evicted = ParseEvictedWeight(p.evicted_weight(), kProto);
    if (!evicted.ok()) return evicted.status();
    kv.evicted_weight = *evicted;
  }
  if (p.has_question_tokens()) kv.question_tokens = p.question_tokens();
  if (p.has_chunk_headroom()) kv.chunk_headroom = p.chunk_headroom();
  if (p.has_first_stage_ratio()) kv.first_stage_ratio = p.first_stage_ratio();
  if (p.has_window()) kv.window = p.window();
  if (p.has_pool_kernel()) kv.pool_kernel = p.pool_kernel();
  if (p.has_reduce_protected_dims()) kv.reduce_protected_dims = p.reduce_protected_dims();
  if (p.has_sink_tokens()) kv.sink_tokens = p.sink_tokens();
  if (absl::Status st = ValidateKvSettings(kv, kProto, n_layers); !st.ok()) return st;
  return kv;
}

}  // namespace

absl::StatusOr<std::string> RenderMessages(const ServeContext& ctx,
                                           const google::protobuf::RepeatedPtrField<v1::ChatMessage>& messages,
                                           const std::string& field) {
  if (ctx.model.tokenizer.chat_template.empty()) {
    return Bad(field, ": the model '", ctx.model.source, "' has no chat template; send text or token_ids");
  }
  std::vector<ChatMessage> msgs;
  for (int k = 0; k < messages.size(); ++k) {
    const v1::ChatMessage& m = messages[k];
    if (!OneOf(m.role(), {"system", "user", "assistant"})) {
      return Bad(field, "[", k, "].role '", m.role(), "' is unknown; use system, user or assistant");
    }
    msgs.push_back({m.role(), m.content()});
  }
  absl::StatusOr<std::string> text = RenderChat(ctx.model.tokenizer, msgs, /*add_generation_prompt=*/true);
  if (!text.ok()) return Bad(field, ": ", text.status().message());
  return text;
}

absl::StatusOr<std::vector<EngineRequest>> BuildEngineRequests(const ServeContext& ctx,
                                                               const v1::GenerateRequest& req, bool streaming) {
  if (req.request_id().size() > kMaxRequestIdBytes) {
    return Bad("request_id has ", req.request_id().size(), " bytes, the limit is ", kMaxRequestIdBytes);
  }
  const int n = req.prompts_size();
  if (streaming && n != 1) return Bad("prompts: GenerateStream takes exactly 1 prompt, got ", n);
  if (n < 1) return Bad("prompts: need at least 1 prompt, got 0");
  if (n > ctx.options.max_prompts_per_call) {
    return Bad("prompts: ", n, " prompts, the limit is ", ctx.options.max_prompts_per_call, " (--max-prompts-per-call)");
  }
  if (req.logprobs().top_logprobs() > kMaxTopLogprobs) {
    return Bad("logprobs.top_logprobs must be in [0, ", kMaxTopLogprobs, "], got ", req.logprobs().top_logprobs());
  }
  const bool score_prompt = req.logprobs().has_prompt_logprobs();
  if (req.logprobs().prompt_logprobs() > kMaxTopLogprobs) {
    return Bad("logprobs.prompt_logprobs must be in [0, ", kMaxTopLogprobs, "], got ", req.logprobs().prompt_logprobs());
  }
  absl::StatusOr<SamplingParams> sampling = Sampling(ctx, req.sampling());
  if (!sampling.ok()) return sampling.status();

  const v1::StoppingCriteria& stop = req.stopping();
  if (stop.has_max_new_tokens()) {
    if (stop.max_new_tokens() < 1 && !score_prompt) {
      return Bad("stopping.max_new_tokens must be >= 1 (0 only with logprobs.prompt_logprobs), got ",
                 stop.max_new_tokens());
    }
    if (stop.max_new_tokens() > ctx.max_new_tokens_limit) {
      return Bad("stopping.max_new_tokens = ", stop.max_new_tokens(), " is above the limit ", ctx.max_new_tokens_limit,
                 " (--max-new-tokens-limit)");
    }
  }
  if (stop.stop_sequences_size() > kMaxStopSequences) {
    return Bad("stopping.stop_sequences has ", stop.stop_sequences_size(), " entries, the limit is ", kMaxStopSequences);
  }
  for (int k = 0; k < stop.stop_sequences_size(); ++k) {
    if (stop.stop_sequences(k).empty()) return Bad("stopping.stop_sequences[", k, "] is empty");
  }
  const int64_t vocab = ctx.model.config.vocab_size;
  for (int k = 0; k < stop.stop_token_ids_size(); ++k) {
    const int32_t t = stop.stop_token_ids(k);
    if (t < 0 || t >= vocab) {
      return Bad("stopping.stop_token_ids[", k, "] = ", t, " is outside the vocabulary [0, ", vocab, ")");
    }
  }
  absl::StatusOr<KvSettings> kv = KvSettingsFromProto(req.kv(), ctx.model.config.n_layers);
  if (!kv.ok()) return kv.status();

  std::vector<EngineRequest> out;
  out.reserve(n);
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<PromptTokenization> prompt = PromptTokens(ctx, req.prompts(i), i);
    if (!prompt.ok()) return prompt.status();
    const int64_t len = static_cast<int64_t>(prompt->tokens.size());
    if (len == 0) return Bad("prompts[", i, "] has no tokens after tokenization");
    if (len >= ctx.max_context) {
      return Bad("prompts[", i, "] has ", len, " tokens; the limit is ", ctx.max_context - 1,
                 " (--max-context ", ctx.max_context, " minus one generated token)");
    }
    int64_t max_new = stop.has_max_new_tokens() ? stop.max_new_tokens() : ctx.options.default_max_new_tokens;
    if (!stop.has_max_new_tokens()) {
      max_new = std::min(max_new, ctx.max_context - len);  // an unset limit fits what is left
    } else if (len + max_new > ctx.max_context) {
      return Bad("prompts[", i, "]: ", len, " prompt tokens + stopping.max_new_tokens ", max_new, " = ", len + max_new,
                 " exceed the context limit ", ctx.max_context, " (--max-context)");
    }
    EngineRequest r;
    r.prompt = std::move(prompt->tokens);
    r.chat_question_tokens = prompt->chat_question_tokens;
    r.max_new_tokens = static_cast<int32_t>(max_new);
    r.sampling = *sampling;
    r.stop_sequences.assign(stop.stop_sequences().begin(), stop.stop_sequences().end());
    r.stop_token_ids.assign(stop.stop_token_ids().begin(), stop.stop_token_ids().end());
    r.ignore_eos = stop.ignore_eos();
    r.top_logprobs = static_cast<int32_t>(req.logprobs().top_logprobs());
    if (score_prompt) r.prompt_logprobs = static_cast<int32_t>(req.logprobs().prompt_logprobs());
    r.kv = *kv;
    out.push_back(std::move(r));
  }
  return out;
}

grpc::Status ToGrpcStatus(const absl::Status& st) {
  // Messages quote the bad value; a 100 KB one would exceed the client's 16 KiB metadata limit
  // and the caller would see only "Stream removed". The head names the field and the value.
  constexpr size_t kMaxMessageBytes = 1024;
  std::string message(st.message());
  if (message.size() > kMaxMessageBytes) {
    const size_t cut = message.size() - kMaxMessageBytes;
    message.resize(kMaxMessageBytes);
    absl::StrAppend(&message, "... (", cut, " more bytes)");
  }
  return grpc::Status(static_cast<grpc::StatusCode>(st.code()), message);
}

const char* RejectReason(const absl::Status& st) {
  switch (st.code()) {
    case absl::StatusCode::kInvalidArgument:
      return "invalid_argument";
    case absl::StatusCode::kUnimplemented:
      return "unimplemented";
    case absl::StatusCode::kUnavailable:
      return "draining";
    case absl::StatusCode::kResourceExhausted:
      // Backpressure carries the engine's queue-full payload; the rest can never fit.
      return IsQueueFull(st) ? "queue_full" : "too_large";
    default:
      return "invalid_argument";
  }
}

}  // namespace kvserve
