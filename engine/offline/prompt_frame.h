// How a retrieval prompt wraps its haystack: as plain text, or as one user turn of the
// model's chat template with the answer's first words already in the assistant's turn.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tokenizer/tokenizer.h"

namespace kvserve {

enum class PromptStyle { kPlain, kChat };
absl::StatusOr<PromptStyle> ParsePromptStyle(std::string_view name);
std::string_view PromptStyleName(PromptStyle style);

struct RetrievalPrompt {
  std::string instruction;    // before the haystack
  std::string question;       // after it, still in the user's words
  std::string answer_prefix;  // the answer's opening words, which the model continues
};

// The tokens before and after the haystack; head starts with BOS when the model wants one.
struct PromptFrame {
  std::vector<int32_t> head, tail;
};

// kChat fails (naming the problem) when the model ships no chat template we render.
absl::StatusOr<PromptFrame> FramePrompt(const Tokenizer& tokenizer, const TokenizerSpec& spec,
                                        const RetrievalPrompt& prompt, PromptStyle style);

}  // namespace kvserve
