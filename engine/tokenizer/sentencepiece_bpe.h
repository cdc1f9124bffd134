// SentencePiece-style BPE ("llama" tokenizer model, e.g. Mistral-7B-v0.3): merges adjacent
// pieces by vocabulary score instead of a merge list, and falls back to <0xNN> byte tokens
// for characters the vocabulary lacks.
#pragma once
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "engine/tokenizer/vocab.h"

namespace kvserve {

class SentencePieceBpe {
 public:
  explicit SentencePieceBpe(const Vocab& vocab);

  // `text` already has spaces replaced by U+2581 (and the optional prefix added). Appends ids.
  // O(n log n) in the text length: the whole fragment is one merge problem (no pre-split).
  void Encode(const Vocab& vocab, std::string_view text, int32_t unk_id,
              std::vector<int32_t>& out) const;

 private:
  std::array<int32_t, 256> byte_ids_;  // <0xNN> token per byte, -1 if absent
};

// U+2581 "▁", SentencePiece's visible space.
inline constexpr std::string_view kSpmSpace = "\xE2\x96\x81";

}  // namespace kvserve
