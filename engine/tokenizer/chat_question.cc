#include "engine/tokenizer/chat_question.h"

#include <string>

namespace kvserve {

int64_t LastUserTurnTokens(const Tokenizer& tokenizer, const TokenizerSpec& spec,
                           const std::vector<ChatMessage>& messages, int64_t total_tokens) {
  int64_t last_user = -1;
  for (size_t k = 0; k < messages.size(); ++k) {
    if (messages[k].role == "user") last_user = static_cast<int64_t>(k);
  }
  if (last_user < 0) return 0;
  if (last_user == 0) return total_tokens;
  const std::vector<ChatMessage> before(messages.begin(), messages.begin() + last_user);
  absl::StatusOr<std::string> prefix = RenderChat(spec, before, /*add_generation_prompt=*/false);
  if (!prefix.ok()) return 0;
  // Chat templates close each turn with a special token, so the turns before tokenize to the
  // prompt's own first tokens.
  const int64_t n =
      static_cast<int64_t>(tokenizer.Encode(*prefix, tokenizer.add_bos(), /*parse_special=*/true).size());
  return n < total_tokens ? total_tokens - n : 0;
}

}  // namespace kvserve
