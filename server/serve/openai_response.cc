// OpenAiFormatter: the JSON shapes of OpenAI's completion, chat.completion and their .chunk
// forms, as the openai SDK parses them, with vLLM's habits where OpenAI leaves a choice open
// (the role in a chat stream's first chunk, "usage": null in chunks before the usage chunk).
#include "server/serve/openai_response.h"

#include "engine/tokenizer/utf8.h"

namespace kvserve {

using nlohmann::json;

std::string OpenAiFinishReason(const v1::Completion& c) {
  switch (c.finish_reason()) {
    case v1::FINISH_REASON_LENGTH: return "length";
    case v1::FINISH_REASON_EOS:
    case v1::FINISH_REASON_STOP_SEQUENCE:
    case v1::FINISH_REASON_STOP_TOKEN: return "stop";
    case v1::FINISH_REASON_CANCELLED: return "cancelled";
    default: return "error";
  }
}

std::string DumpJson(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

OpenAiFormatter::OpenAiFormatter(const OpenAiRequest& request, const Tokenizer& tokenizer, std::string model,
                                 std::string id, int64_t created, std::vector<int64_t> prompt_tokens,
                                 std::vector<EchoedPrompt> echo)
    : request_(request), tokenizer_(tokenizer), model_(std::move(model)), id_(std::move(id)), created_(created),
      prompt_tokens_(std::move(prompt_tokens)), echo_(std::move(echo)) {
  const int64_t choices = request_.prompts * request_.n;
  text_offset_.assign(choices, 0);
  finals_.resize(choices);
  if (request_.echo) {
    for (int64_t i = 0; i < choices; ++i) text_offset_[i] = static_cast<int64_t>(echo_[PromptOf(i)].text.size());
  }
  echo_due_.assign(choices, request_.echo);
}

json OpenAiFormatter::Envelope(bool chunk) const {
  const bool chat = request_.endpoint == OpenAiEndpoint::kChatCompletions;
  const char* object = chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  return json{{"id", id_}, {"object", object}, {"created", created_}, {"model", model_}};
}

json OpenAiFormatter::Logprobs(const ChoiceOutput& out, bool with_echo) {
  const int64_t index = out.index;
  const std::vector<TokenLogprob>& lps = out.logprobs;
  const int32_t top_n = request_.top_logprobs;
  if (top_n < 0) return nullptr;
  if (request_.endpoint == OpenAiEndpoint::kChatCompletions) {
    auto entry = [&](int32_t id, float lp) {
      const std::string bytes = tokenizer_.TokenBytes(id);
      json b = json::array();
      for (unsigned char c : bytes) b.push_back(static_cast<int>(c));
      return json{{"token", utf8::Sanitize(bytes)}, {"logprob", lp}, {"bytes", b}};
    };
    json content = json::array();
    for (const TokenLogprob& t : lps) {
      json e = entry(t.token, t.logprob);
      json top = json::array();
      for (size_t k = 0; k < t.top.size() && static_cast<int32_t>(k) < top_n; ++k) {
        top.push_back(entry(t.top[k].first, t.top[k].second));
      }
      e["top_logprobs"] = top;
      content.push_back(e);
    }
    return json{{"content", content}};
  }
  // Completions: parallel arrays, and text_offset, the byte offset of each token in the
  // choice's text (echo included).
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(), offsets = json::array();
  auto add = [&](int32_t token, json logprob, json alternatives, int64_t offset) {
    tokens.push_back(utf8::Sanitize(tokenizer_.TokenBytes(token)));
    token_logprobs.push_back(std::move(logprob));
    top.push_back(std::move(alternatives));
    offsets.push_back(offset);
  };
  auto alternatives = [&](const TokenLogprob& t) {
    json a = json::object();
    for (size_t k = 0; k < t.top.size() && static_cast<int32_t>(k) < top_n; ++k) {
      a[utf8::Sanitize(tokenizer_.TokenBytes(t.top[k].first))] = t.top[k].second;
    }
    return a;
  };
  // Echo: the prompt's tokens first, as the engine scored them, in the choice's first piece;
  // the first token has nothing before it, so its logprob is null.
  if (with_echo) {
    const EchoedPrompt& prompt = echo_[PromptOf(index)];
    int64_t offset = 0;
    for (size_t i = 0; i < prompt.tokens.size(); ++i) {
      if (i == 0 || i > out.prompt_logprobs.size()) {
        add(prompt.tokens[i], nullptr, nullptr, offset);
      } else {
        const TokenLogprob& t = out.prompt_logprobs[i - 1];
        add(t.token, t.logprob, alternatives(t), offset);
      }
      offset += static_cast<int64_t>(tokenizer_.TokenBytes(prompt.tokens[i]).size());
    }
  }
  for (const TokenLogprob& t : lps) {
    add(t.token, t.logprob, alternatives(t), text_offset_[index]);
    text_offset_[index] += static_cast<int64_t>(tokenizer_.TokenBytes(t.token).size());
  }
  return json{{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top}, {"text_offset", offsets}};
}

json OpenAiFormatter::Choice(const ChoiceOutput& out, bool chunk) {
  const bool chat = request_.endpoint == OpenAiEndpoint::kChatCompletions;
  json c{{"index", out.index}};
  if (chat) {
    if (chunk) {
      c["delta"] = out.text.empty() ? json::object() : json{{"content", out.text}};
    } else {
      c["message"] = json{{"role", "assistant"}, {"content", out.text}};
    }
    c["logprobs"] = Logprobs(out, false);
  } else {
    // The echo leads the choice's first piece (unless a stream sent it first, without logprobs).
    const bool echo = echo_due_[out.index];
    echo_due_[out.index] = false;
    c["text"] = echo ? echo_[PromptOf(out.index)].text + out.text : out.text;
    c["logprobs"] = Logprobs(out, echo);
  }
  c["finish_reason"] = nullptr;
  if (out.final) {
    finals_[out.index] = *out.final;
    c["finish_reason"] = OpenAiFinishReason(*out.final);
    if (!out.final->error().empty()) c["error"] = out.final->error();
  }
  return c;
}

json OpenAiFormatter::Usage() const {
  int64_t prompt = 0, completion = 0, kept = 0, evicted = 0, peak = 0;
  for (int64_t t : prompt_tokens_) prompt += t;  // each prompt once, however many choices
  for (const v1::Completion& c : finals_) {
    completion += c.usage().generated_tokens();
    kept += c.usage().kv_tokens_kept();
    evicted += c.usage().kv_entries_evicted();
    peak += c.usage().peak_kv_bytes();
  }
  json kv{{"kv_tokens_kept", kept}, {"kv_entries_evicted", evicted}, {"peak_kv_bytes", peak}};
  if (finals_.size() == 1 && finals_[0].usage().has_kv_compressibility()) {
    const v1::KvCompressibility& k = finals_[0].usage().kv_compressibility();
    kv["compressibility"] = json{{"trace", k.trace()},
                                 {"effective_rank", k.effective_rank()},
                                 {"spectral_tail", k.spectral_tail()},
                                 {"risk", k.risk()},
                                 {"budget_tokens", k.budget_tokens()}};
  }
  return json{{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion},
              {"kv", kv}};
}

json OpenAiFormatter::Unary(const std::vector<ChoiceOutput>& choices) {
  json body = Envelope(/*chunk=*/false);
  json list = json::array();
  for (const ChoiceOutput& c : choices) list.push_back(Choice(c, false));
  body["choices"] = list;
  body["usage"] = Usage();
  return body;
}

namespace {
std::string Event(const json& j) { return "data: " + DumpJson(j) + "\n\n"; }
}  // namespace

std::string OpenAiFormatter::StreamStart() {
  const int64_t choices = request_.prompts * request_.n;
  const bool chat = request_.endpoint == OpenAiEndpoint::kChatCompletions;
  // With logprobs, a completion's echo waits for the prompt's logprobs (its first piece).
  if (!chat && (!request_.echo || request_.top_logprobs >= 0)) return "";
  std::string out;
  for (int64_t i = 0; i < choices; ++i) {
    json e = Envelope(/*chunk=*/true);
    json c{{"index", i}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
    if (chat) {
      c["delta"] = json{{"role", "assistant"}, {"content", ""}};
    } else {
      c["text"] = echo_[PromptOf(i)].text;
      echo_due_[i] = false;
    }
    e["choices"] = json::array({c});
    if (request_.include_usage) e["usage"] = nullptr;
    out += Event(e);
  }
  return out;
}

std::string OpenAiFormatter::StreamChunk(const ChoiceOutput& piece) {
  json e = Envelope(/*chunk=*/true);
  e["choices"] = json::array({Choice(piece, /*chunk=*/true)});
  if (request_.include_usage) e["usage"] = nullptr;
  return Event(e);
}

std::string OpenAiFormatter::StreamEnd() {
  std::string out;
  if (request_.include_usage) {
    json e = Envelope(/*chunk=*/true);
    e["choices"] = json::array();
    e["usage"] = Usage();
    out += Event(e);
  }
  return out + "data: [DONE]\n\n";
}

}  // namespace kvserve
