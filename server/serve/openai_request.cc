// OpenAI JSON -> GenerateRequest. Only shape and type are checked here; every value range the
// gRPC API shares (temperature, top_p, token ids, max_tokens against the context, kv_*) is
// checked once, by BuildEngineRequests, and its messages renamed to the body's field names.
#include "server/serve/openai_request.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "server/serve/json_body.h"

namespace kvserve {
namespace {

using nlohmann::json;

constexpr int64_t kMaxTopLogprobs = 20;
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kInt32Min = std::numeric_limits<int32_t>::min();

absl::Status Bad(auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); }
absl::Status Unsupported(auto&&... parts) { return absl::UnimplementedError(absl::StrCat(parts...)); }

// A completion's `prompt`: a string, an array of strings, an array of token ids, or an array
// of such arrays. Each becomes one proto prompt.
absl::Status ReadCompletionPrompts(const json& body, std::vector<v1::Prompt>* out) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return Bad("prompt is required");
  const json& p = *it;
  auto ids = [](const json& arr, const std::string& name, v1::Prompt* prompt) -> absl::Status {
    for (size_t j = 0; j < arr.size(); ++j) {
      absl::StatusOr<int64_t> id = JsonInt(arr[j], absl::StrCat(name, "[", j, "]"), kInt32Min, kInt32Max);
      if (!id.ok()) return id.status();
      prompt->add_token_ids(static_cast<int32_t>(*id));
    }
    return absl::OkStatus();
  };
  if (p.is_string()) {
    out->emplace_back().set_text(p.get<std::string>());
    return absl::OkStatus();
  }
  if (!p.is_array() || p.empty()) {
    return Bad("prompt must be a string, an array of strings, of token ids, or of token id arrays, got ", QuoteJson(p));
  }
  if (p[0].is_number()) return ids(p, "prompt", &out->emplace_back());
  for (size_t i = 0; i < p.size(); ++i) {
    const std::string name = absl::StrCat("prompt[", i, "]");
    if (p[i].is_string()) {
      out->emplace_back().set_text(p[i].get<std::string>());
    } else if (p[i].is_array()) {
      if (absl::Status st = ids(p[i], name, &out->emplace_back()); !st.ok()) return st;
    } else {
      return Bad(name, " must be a string or an array of token ids, got ", QuoteJson(p[i]));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadOpenAiMessages(const json& body, v1::Prompt* out) {
  auto it = body.find("messages");
  if (it == body.end() || it->is_null()) return Bad("messages is required");
  if (!it->is_array() || it->empty()) return Bad("messages must be a non-empty array, got ", QuoteJson(*it));
  for (size_t k = 0; k < it->size(); ++k) {
    const json& m = (*it)[k];
    const std::string name = absl::StrCat("messages[", k, "]");
    if (!m.is_object()) return Bad(name, " must be an object with role and content, got ", QuoteJson(m));
    v1::ChatMessage* msg = out->add_messages();
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) return Bad(name, ".role must be a string");
    msg->set_role(*role == "developer" ? "system" : role->get<std::string>());
    auto content = m.find("content");
    if (content == m.end() || content->is_null()) continue;  // an assistant turn with only tool calls
    if (content->is_string()) {
      msg->set_content(content->get<std::string>());
      continue;
    }
    if (!content->is_array()) return Bad(name, ".content must be a string or an array of parts, got ", QuoteJson(*content));
    std::string text;
    for (size_t j = 0; j < content->size(); ++j) {
      const json& part = (*content)[j];
      const std::string pname = absl::StrCat(name, ".content[", j, "]");
      if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
        return Bad(pname, " must be an object with a type, got ", QuoteJson(part));
      }
      if (part["type"] != "text") {
        return Unsupported(pname, ".type '", part["type"].get<std::string>(), "' is not supported: the model reads text only");
      }
      if (!part.contains("text") || !part["text"].is_string()) return Bad(pname, ".text must be a string");
      text += part["text"].get<std::string>();
    }
    msg->set_content(text);
  }
  return absl::OkStatus();
}

namespace {

// Fields kvserve recognises but cannot honour: a 400 naming them beats silently different output.
absl::Status RejectUnsupported(JsonBody& b, int64_t n) {
  if (std::optional<std::string> suffix = b.String("suffix"); suffix && !suffix->empty()) {
    return Unsupported("suffix is not supported (no fill-in-the-middle)");
  }
  if (std::optional<int64_t> best_of = b.Int("best_of", 1, 128); best_of && *best_of != n) {
    return Unsupported("best_of is not supported unless it equals n");
  }
  for (const char* f : {"logit_bias", "tools", "functions"}) {
    const json* v = b.Find(f);
    if (v != nullptr && !v->empty()) return Unsupported(f, " is not supported");
  }
  for (const char* f : {"tool_choice", "function_call"}) {
    const json* v = b.Find(f);
    if (v != nullptr && !(v->is_string() && *v == "none")) return Unsupported(f, " is not supported");
  }
  if (const json* rf = b.Find("response_format"); rf != nullptr) {
    if (!rf->is_object() || !rf->contains("type") || (*rf)["type"] != "text") {
      return Unsupported("response_format is not supported beyond {\"type\": \"text\"}");
    }
  }
  return b.status();
}

// kvserve's KV extras: the proto's KvCacheParams, each field as kv_<name> at the top level.
void ReadKv(JsonBody& b, v1::KvCacheParams* kv) {
  constexpr int64_t kMaxTokens = int64_t{1} << 30;
  if (auto v = b.String("kv_policy")) kv->set_policy(*v);
  if (auto v = b.Number("kv_budget")) kv->set_budget(*v);
  if (auto v = b.Number("kv_budget_auto_risk")) kv->set_budget_auto_risk(*v);
  if (auto v = b.String("kv_budget_plan")) kv->set_budget_plan(*v);
  if (auto v = b.Ints("kv_layer_budgets", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max())) {
    for (int64_t x : *v) kv->add_layer_budgets(x);
  }
  if (auto v = b.String("kv_compress_at")) kv->set_compress_at(*v);
  if (auto v = b.String("kv_chunk_scoring")) kv->set_chunk_scoring(*v);
  if (auto v = b.String("kv_evicted_weight")) kv->set_evicted_weight(*v);
  if (auto v = b.Int("kv_question_tokens", -kMaxTokens, kMaxTokens)) kv->set_question_tokens(*v);
  if (auto v = b.Int("kv_chunk_headroom", -kMaxTokens, kMaxTokens)) kv->set_chunk_headroom(*v);
  if (auto v = b.Number("kv_first_stage_ratio")) kv->set_first_stage_ratio(*v);
  if (auto v = b.Int("kv_window", -kMaxTokens, kMaxTokens)) kv->set_window(*v);
  if (auto v = b.Int("kv_pool_kernel", -kMaxTokens, kMaxTokens)) kv->set_pool_kernel(*v);
  if (auto v = b.Int("kv_reduce_protected_dims", -kMaxTokens, kMaxTokens)) kv->set_reduce_protected_dims(*v);
  if (auto v = b.Int("kv_sink_tokens", -kMaxTokens, kMaxTokens)) kv->set_sink_tokens(*v);
}

}  // namespace

absl::StatusOr<OpenAiRequest> ParseOpenAiRequest(const json& body, OpenAiEndpoint endpoint, int64_t max_choices) {
  OpenAiRequest r;
  r.endpoint = endpoint;
  const bool chat = endpoint == OpenAiEndpoint::kChatCompletions;
  JsonBody b(body);

  std::vector<v1::Prompt> prompts;
  if (chat) {
    if (absl::Status st = ReadOpenAiMessages(body, &prompts.emplace_back()); !st.ok()) return st;
  } else {
    if (absl::Status st = ReadCompletionPrompts(body, &prompts); !st.ok()) return st;
  }
  b.String("model");  // any name: this server serves one model (GET /v1/models names it)
  b.String("user");
  r.n = b.Int("n", 1, max_choices).value_or(1);
  r.prompts = static_cast<int64_t>(prompts.size());
  if (b.ok() && r.prompts * r.n > max_choices) {
    return Bad("n = ", r.n, " choices for ", r.prompts, " prompts make ", r.prompts * r.n, ", the limit is ", max_choices,
               " (--max-prompts-per-call)");
  }
  if (absl::Status st = RejectUnsupported(b, r.n); !st.ok()) return st;

  r.stream = b.Bool("stream").value_or(false);
  if (const json* so = b.Find("stream_options"); so != nullptr) {
    if (!so->is_object()) return Bad("stream_options must be an object, got ", QuoteJson(*so));
    if (!r.stream) return Bad("stream_options is only allowed with stream: true");
    JsonBody opts(*so);
    r.include_usage = opts.Bool("include_usage").value_or(false);
    if (!opts.ok()) return Bad("stream_options.", opts.status().message());
  }

  v1::SamplingParams* s = r.proto.mutable_sampling();
  // Unset, OpenAI samples at temperature 1 (the gRPC API's unset is greedy): clients written for
  // OpenAI get what they expect.
  s->set_temperature(static_cast<float>(b.Number("temperature").value_or(1.0)));
  if (auto v = b.Number("top_p")) s->set_top_p(static_cast<float>(*v));
  if (auto v = b.Number("min_p")) s->set_min_p(static_cast<float>(*v));
  if (auto v = b.Number("repetition_penalty")) s->set_repetition_penalty(static_cast<float>(*v));
  if (auto v = b.Number("presence_penalty")) s->set_presence_penalty(static_cast<float>(*v));
  if (auto v = b.Number("frequency_penalty")) s->set_frequency_penalty(static_cast<float>(*v));
  if (auto v = b.Int("top_k", -1, kInt32Max)) s->set_top_k(*v < 0 ? 0 : static_cast<int32_t>(*v));  // vLLM: -1 is off
  if (auto v = b.Int("seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max())) {
    r.seed = static_cast<uint64_t>(*v);
  }

  v1::StoppingCriteria* stop = r.proto.mutable_stopping();
  std::optional<int64_t> max_tokens = b.Int("max_tokens", 0, std::numeric_limits<uint32_t>::max());
  if (chat) {
    if (auto v = b.Int("max_completion_tokens", 0, std::numeric_limits<uint32_t>::max())) {
      max_tokens = v;  // OpenAI's newer name wins over the deprecated max_tokens
      r.max_tokens_field = "max_completion_tokens";
    }
  }
  if (max_tokens) stop->set_max_new_tokens(static_cast<uint32_t>(*max_tokens));
  if (auto v = b.Strings("stop")) {
    for (std::string& x : *v) stop->add_stop_sequences(std::move(x));
  }
  if (auto v = b.Ints("stop_token_ids", kInt32Min, kInt32Max)) {
    for (int64_t x : *v) stop->add_stop_token_ids(static_cast<int32_t>(x));
  }
  stop->set_ignore_eos(b.Bool("ignore_eos").value_or(false));

  if (chat) {
    const bool logprobs = b.Bool("logprobs").value_or(false);
    std::optional<int64_t> top = b.Int("top_logprobs", 0, kMaxTopLogprobs);
    if (top && !logprobs) return Bad("top_logprobs needs logprobs: true");
    if (logprobs) r.top_logprobs = static_cast<int32_t>(top.value_or(0));
  } else {
    if (auto v = b.Int("logprobs", 0, kMaxTopLogprobs)) r.top_logprobs = static_cast<int32_t>(*v);
    r.echo = b.Bool("echo").value_or(false);
    // Echo with logprobs scores the prompt, and echo lets max_tokens be 0: the prompt alone, as
    // lm-eval's loglikelihood asks (then scored too, which the engine needs to run a request
    // that generates nothing).
    if (r.echo && (r.top_logprobs >= 0 || max_tokens == 0)) {
      r.proto.mutable_logprobs()->set_prompt_logprobs(static_cast<uint32_t>(std::max(0, r.top_logprobs)));
    }
  }
  if (r.top_logprobs >= 0) r.proto.mutable_logprobs()->set_top_logprobs(std::max(1, r.top_logprobs));
  ReadKv(b, r.proto.mutable_kv());
  if (!b.ok()) return b.status();

  for (const v1::Prompt& p : prompts) *r.proto.add_prompts() = p;
  return r;
}

FieldRenames OpenAiFieldRenames(const OpenAiRequest& r) {
  const bool chat = r.endpoint == OpenAiEndpoint::kChatCompletions;
  FieldRenames renames = {
      {"sampling: ", ""},
      {"stopping.max_new_tokens", r.max_tokens_field},
      {"stopping.stop_sequences", "stop"},
      {"stopping.stop_token_ids", "stop_token_ids"},
      {"logprobs.top_logprobs", chat ? "top_logprobs" : "logprobs"},
      {"logprobs.prompt_logprobs", "echo"},
      {"kv.", "kv_"},
  };
  if (chat) {
    renames.push_back({"prompts[0].messages", "messages"});
    renames.push_back({"prompts[0]", "messages"});
  } else if (r.prompts == 1) {
    renames.push_back({"prompts[0].token_ids", "prompt"});
    renames.push_back({"prompts[0]", "prompt"});
  } else {
    renames.push_back({"].token_ids[", "]["});
    renames.push_back({"prompts[", "prompt["});
  }
  return renames;
}

}  // namespace kvserve
