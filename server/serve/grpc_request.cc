// Validation and conversion of GenerateRequest. Every check here exists so that a bad
// request is answered with a precise INVALID_ARGUMENT instead of reaching the engine.
#include "server/serve/grpc_request.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/compress/compression_settings.h"
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

absl::Status CheckKv(const ServeContext& ctx, const v1::KvCacheParams& kv) {
  const std::vector<std::string>& policies = KvPolicyNames();
  if (!kv.policy().empty() && std::find(policies.begin(), policies.end(), kv.policy()) == policies.end()) {
    return Bad("kv.policy '", kv.policy(), "' is unknown; use one of ", absl::StrJoin(policies, ", "));
  }
  if (kv.has_budget()) {
    const double b = kv.budget();
    if (!(std::isfinite(b) && b > 0)) return Bad("kv.budget must be > 0, got ", b);
    if (b > 1 && b != std::floor(b)) {
      return Bad("kv.budget ", b, " is above 1, so it counts tokens and must be a whole number");
    }
  }
  if (kv.has_budget_auto_risk()) {
    const double r = kv.budget_auto_risk();
    if (!(std::isfinite(r) && r > 0)) return Bad("kv.budget_auto_risk must be > 0, got ", r);
    if (kv.has_budget()) return Bad("kv.budget and kv.budget_auto_risk exclude each other; set one");
    if (kv.layer_budgets_size() > 0) return Bad("kv.layer_budgets and kv.budget_auto_risk exclude each other; set one");
    if (kv.compress_at() == "chunk") {
      return Bad("kv.budget_auto_risk needs kv.compress_at prefill_end (the estimate needs the whole prompt), got chunk");
    }
  }
  if (!kv.budget_plan().empty() && !OneOf(kv.budget_plan(), {"uniform", "pyramid", "ripple"})) {
    return Bad("kv.budget_plan '", kv.budget_plan(), "' is unknown; use uniform, pyramid or ripple");
  }
  if (kv.layer_budgets_size() > 0) {
    if (kv.layer_budgets_size() != ctx.model.config.n_layers) {
      return Bad("kv.layer_budgets has ", kv.layer_budgets_size(), " entries, the model has ",
                 ctx.model.config.n_layers, " layers");
    }
    for (int l = 0; l < kv.layer_budgets_size(); ++l) {
      if (kv.layer_budgets(l) < 1) return Bad("kv.layer_budgets[", l, "] must be >= 1, got ", kv.layer_budgets(l));
    }
  }
  if (!kv.compress_at().empty() && !OneOf(kv.compress_at(), {"prefill_end", "chunk"})) {
    return Bad("kv.compress_at '", kv.compress_at(), "' is unknown; use prefill_end or chunk");
  }
  if (!kv.chunk_scoring().empty() && !OneOf(kv.chunk_scoring(), {"question", "window"})) {
    return Bad("kv.chunk_scoring '", kv.chunk_scoring(), "' is unknown; use question or window");
  }
  if (kv.has_question_tokens()) {
    const int64_t n = kv.question_tokens();
    if (n < 1 || n > kMaxScoringQueries) {
      return Bad("kv.question_tokens must be in [1, ", kMaxScoringQueries, "], got ", n);
    }
    if (kv.chunk_scoring() == "window") {
      return Bad("kv.question_tokens ", n, " needs kv.chunk_scoring question, got window");
    }
    if (kv.compress_at() == "prefill_end") {
      return Bad("kv.question_tokens ", n, " needs kv.compress_at chunk (prefill_end scores with the window), "
                 "got prefill_end");
    }
  }
  if (kv.has_first_stage_ratio() && !(kv.first_stage_ratio() > 0 && kv.first_stage_ratio() <= 1)) {
    return Bad("kv.first_stage_ratio must be in (0, 1], got ", kv.first_stage_ratio());
  }
  if (kv.has_window() && (kv.window() < 1 || kv.window() > kMaxScoringQueries)) {
    return Bad("kv.window must be in [1, ", kMaxScoringQueries, "], got ", kv.window());
  }
  if (kv.has_pool_kernel() && (kv.pool_kernel() < 1 || kv.pool_kernel() % 2 == 0 || kv.pool_kernel() > 255)) {
    return Bad("kv.pool_kernel must be odd and in [1, 255], got ", kv.pool_kernel());
  }
  if (kv.has_reduce_protected_dims() && kv.reduce_protected_dims() < 1) {
    return Bad("kv.reduce_protected_dims must be >= 1, got ", kv.reduce_protected_dims());
  }
  return absl::OkStatus();
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
  absl::StatusOr<SamplingParams> sampling = Sampling(ctx, req.sampling());
  if (!sampling.ok()) return sampling.status();

  const v1::StoppingCriteria& stop = req.stopping();
  if (stop.has_max_new_tokens()) {
    if (stop.max_new_tokens() < 1) return Bad("stopping.max_new_tokens must be >= 1, got ", stop.max_new_tokens());
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
  if (absl::Status st = CheckKv(ctx, req.kv()); !st.ok()) return st;

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
    const v1::KvCacheParams& kv = req.kv();
    r.kv_policy = kv.policy();
    r.kv_budget = kv.has_budget() ? kv.budget() : 0;
    r.kv_auto_risk = kv.has_budget_auto_risk() ? kv.budget_auto_risk() : 0;
    r.kv_plan = kv.budget_plan();
    r.kv_compress_at = kv.compress_at();
    r.kv_first_stage_ratio = kv.has_first_stage_ratio() ? kv.first_stage_ratio() : 0;
    r.kv_window = kv.has_window() ? kv.window() : 0;
    r.kv_pool_kernel = kv.has_pool_kernel() ? kv.pool_kernel() : 0;
    r.layer_quota.assign(kv.layer_budgets().begin(), kv.layer_budgets().end());
    r.kv_reduce_protected_dims = kv.has_reduce_protected_dims() ? kv.reduce_protected_dims() : 0;
    r.kv_chunk_scoring = kv.chunk_scoring();
    if (kv.has_question_tokens()) r.kv_question_tokens = kv.question_tokens();
    out.push_back(std::move(r));
  }
  return out;
}

grpc::Status ToGrpcStatus(const absl::Status& st) {
  return grpc::Status(static_cast<grpc::StatusCode>(st.code()), std::string(st.message()));
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
      // The engine says "waiting queue is full" for backpressure; the rest can never fit.
      return absl::StrContains(st.message(), "queue is full") ? "queue_full" : "too_large";
    default:
      return "invalid_argument";
  }
}

}  // namespace kvserve
