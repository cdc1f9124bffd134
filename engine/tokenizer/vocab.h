// The id <-> text tables every tokenizer model shares, built once from a TokenizerSpec.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/tokenizer/tokenizer_spec.h"

namespace kvserve {

struct Vocab {
  std::vector<std::string> tokens;  // id -> text as stored in the model file
  std::vector<TokenType> types;     // id -> type (filled with kNormal when the spec has none)
  std::vector<float> scores;        // id -> SentencePiece score (0 when absent)
  // text -> id. Views point into `tokens`, so a Vocab is built in place and never copied.
  std::unordered_map<std::string_view, int32_t> ids;

  explicit Vocab(const TokenizerSpec& spec);
  Vocab(const Vocab&) = delete;
  Vocab& operator=(const Vocab&) = delete;

  int32_t size() const { return static_cast<int32_t>(tokens.size()); }
  // -1 when `text` is not a token.
  int32_t Find(std::string_view text) const {
    auto it = ids.find(text);
    return it == ids.end() ? -1 : it->second;
  }
};

}  // namespace kvserve
