// Vocab construction; see vocab.h.
#include "engine/tokenizer/vocab.h"

namespace kvserve {

Vocab::Vocab(const TokenizerSpec& spec) : tokens(spec.tokens) {
  types = spec.types;
  types.resize(tokens.size(), TokenType::kNormal);
  scores = spec.scores;
  scores.resize(tokens.size(), 0.0f);
  ids.reserve(tokens.size() * 2);
  // Later ids win on duplicate texts, as in llama.cpp, so both agree on ambiguous vocabs.
  for (size_t i = 0; i < tokens.size(); ++i) ids[tokens[i]] = static_cast<int32_t>(i);
}

}  // namespace kvserve
