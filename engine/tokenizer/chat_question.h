// Where a chat prompt's question is: the last user turn, what follows it and the generation
// prompt. Chunk-mode compression scores the cache with that span's queries, so a long
// document in an earlier turn is judged by what the user asks last.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/tokenizer.h"

namespace kvserve {

// The number of the prompt's last tokens from the start of the last user turn; the prompt
// is `messages` rendered with the generation prompt and tokenized with BOS and special
// tokens (total_tokens long). 0 without a user turn or where the template cannot render.
int64_t LastUserTurnTokens(const Tokenizer& tokenizer, const TokenizerSpec& spec,
                           const std::vector<ChatMessage>& messages, int64_t total_tokens);

}  // namespace kvserve
