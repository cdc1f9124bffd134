// Splits text around special-token strings ("<|im_start|>", user-defined tokens) before
// pre-tokenization, so those strings become single ids instead of being spelled out.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "engine/tokenizer/vocab.h"

namespace kvserve {

struct TextSegment {
  std::string_view text;  // raw text to tokenize normally (empty when token >= 0)
  int32_t token = -1;     // a matched special token
};

class SpecialTokenMatcher {
 public:
  explicit SpecialTokenMatcher(const Vocab& vocab);

  // Control and unknown tokens are matched only when `parse_special`; user-defined tokens
  // always are (they are ordinary words the vocabulary wants kept whole), as in llama.cpp.
  // Longer tokens win over shorter ones wherever matches overlap.
  std::vector<TextSegment> Split(const Vocab& vocab, std::string_view text,
                                 bool parse_special) const;

 private:
  // Candidates bucketed by first byte, longest first, so a scan touches only plausible ones.
  std::vector<std::vector<int32_t>> by_first_byte_;
  bool any_ = false;
};

}  // namespace kvserve
