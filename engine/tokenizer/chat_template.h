// Chat prompt rendering for the template families kvserve recognizes in a model's Jinja
// chat_template: ChatML (SmolLM2, Qwen2/2.5; including a built-in default system prompt)
// and Llama-3 headers (3.0, and 3.1+ with its knowledge/date system block). The output is
// byte-identical to what the Jinja template renders (checked against jinja2 in tests).
#pragma once
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/tokenizer/tokenizer_spec.h"

namespace kvserve {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", ...
  std::string content;
};

enum class ChatTemplateFamily { kChatMl, kLlama3 };

// Which family `chat_template` is; InvalidArgument (quoting the template's start) otherwise.
absl::StatusOr<ChatTemplateFamily> DetectChatTemplate(const std::string& chat_template);

// Renders `messages` with spec.chat_template. `add_generation_prompt` appends the header of
// the assistant turn the model should write next. Llama-3 templates use
// spec.tokens[spec.bos_id] as bos_token.
absl::StatusOr<std::string> RenderChat(const TokenizerSpec& spec,
                                       absl::Span<const ChatMessage> messages,
                                       bool add_generation_prompt);

}  // namespace kvserve
