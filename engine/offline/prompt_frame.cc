// How a retrieval prompt wraps its haystack: plain text or one chat turn.
#include "engine/offline/prompt_frame.h"

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/chat_template.h"

namespace kvserve {

absl::StatusOr<PromptStyle> ParsePromptStyle(std::string_view name) {
  if (name == "plain") return PromptStyle::kPlain;
  if (name == "chat") return PromptStyle::kChat;
  return absl::InvalidArgumentError(absl::StrCat("unknown prompt style '", std::string(name),
                                                 "' (expected plain or chat)"));
}

std::string_view PromptStyleName(PromptStyle style) { return style == PromptStyle::kChat ? "chat" : "plain"; }

absl::StatusOr<PromptFrame> FramePrompt(const Tokenizer& tokenizer, const TokenizerSpec& spec,
                                        const RetrievalPrompt& p, PromptStyle style) {
  PromptFrame frame;
  if (style == PromptStyle::kPlain) {
    frame.head = tokenizer.Encode(p.instruction, tokenizer.add_bos(), /*parse_special=*/false);
    frame.tail = tokenizer.Encode(absl::StrCat(p.question, " ", p.answer_prefix), false, false);
    return frame;
  }
  // Render the whole turn around a marker, then cut there: the template decides everything
  // around the user's text, including a default system prompt.
  constexpr std::string_view kMarker = "\x1f" "HAYSTACK" "\x1f";
  std::vector<ChatMessage> messages = {{"user", absl::StrCat(p.instruction, std::string(kMarker), p.question)}};
  absl::StatusOr<std::string> rendered = RenderChat(spec, messages, /*add_generation_prompt=*/true);
  if (!rendered.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("chat prompt style: ", rendered.status().message()));
  }
  const size_t at = rendered->find(kMarker);
  frame.head = tokenizer.Encode(rendered->substr(0, at), tokenizer.add_bos(), /*parse_special=*/true);
  frame.tail = tokenizer.Encode(absl::StrCat(rendered->substr(at + kMarker.size()), p.answer_prefix), false, true);
  return frame;
}

}  // namespace kvserve
