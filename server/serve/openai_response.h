// OpenAI response bodies from a generation's output: the unary completion and chat completion
// objects, the Server-Sent Events chunks of a stream, and the usage object with kvserve's KV
// figures under usage.kv.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"
#include "server/serve/http_generation.h"
#include "server/serve/openai_request.h"

namespace kvserve {

// Every choice's finish reason as OpenAI names it: "stop" (EOS, a stop string or stop token),
// "length"; kvserve adds "cancelled" and "error" (with the choice's "error" message).
std::string OpenAiFinishReason(const v1::Completion& c);

// Serialized without throwing: invalid UTF-8 in generated text becomes U+FFFD.
std::string DumpJson(const nlohmann::json& j);

// What a completion with echo starts with: the prompt as given, and its tokens (the first
// entries of the choice's logprobs).
struct EchoedPrompt {
  std::string text;
  std::vector<int32_t> tokens;
};

class OpenAiFormatter {
 public:
  // `prompt_tokens[p]` and `echo[p]` (used when the request echoes) are prompt p's.
  OpenAiFormatter(const OpenAiRequest& request, const Tokenizer& tokenizer, std::string model, std::string id,
                  int64_t created, std::vector<int64_t> prompt_tokens, std::vector<EchoedPrompt> echo);

  // The unary body; `choices[i]` is choice i's whole output (final set).
  nlohmann::json Unary(const std::vector<ChoiceOutput>& choices);
  // Stream events, each "data: {...}\n\n". First: what precedes any token (chat: each
  // choice's assistant role; completions with echo and no logprobs: the prompts). Then one per
  // piece of output (with echo and logprobs, a choice's first piece starts with its prompt).
  // Last: the usage chunk when the request asked for it, and "data: [DONE]".
  std::string StreamStart();
  std::string StreamChunk(const ChoiceOutput& piece);
  std::string StreamEnd();

 private:
  nlohmann::json Envelope(bool chunk) const;
  nlohmann::json Choice(const ChoiceOutput& out, bool chunk);
  // with_echo: the echoed prompt's tokens first (completions).
  nlohmann::json Logprobs(const ChoiceOutput& out, bool with_echo);
  nlohmann::json Usage() const;
  int64_t PromptOf(int64_t choice) const { return choice / request_.n; }

  const OpenAiRequest& request_;
  const Tokenizer& tokenizer_;
  std::string model_, id_;
  int64_t created_;
  std::vector<int64_t> prompt_tokens_;
  std::vector<EchoedPrompt> echo_;
  std::vector<int64_t> text_offset_;         // per choice: bytes of text so far (completions logprobs)
  // Per choice: its prompt (text and scored tokens) is still to be written, in its first piece
  // (a stream with echo and logprobs holds the echo until the prompt's logprobs come).
  std::vector<bool> echo_due_;
  std::vector<v1::Completion> finals_;       // per choice, as they end (for the usage)
};

}  // namespace kvserve
