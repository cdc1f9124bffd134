// Pre-tokenization for byte-level BPE: splits text into the "words" that BPE merges never
// cross, using the regex chain each model family was trained with (PCRE2, UTF + UCP).
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kvserve {

class PreTokenizer {
 public:
  // `pre` is the GGUF tokenizer.ggml.pre name ("gpt2", "smollm", "llama-bpe", "qwen2", ...).
  static absl::StatusOr<PreTokenizer> Create(std::string_view pre);

  // Appends the pieces of `text` (views into it) to `out`. Each regex of the chain splits
  // every piece from the previous stage; text between matches is kept as its own piece, so
  // the pieces always concatenate back to `text`.
  void Split(std::string_view text, std::vector<std::string_view>& out) const;

  // True when a word that is itself a vocabulary entry is emitted whole instead of merged
  // (Llama-3 tokenizers were trained that way).
  bool ignore_merges() const { return ignore_merges_; }

 private:
  struct Regex;  // owns one compiled pcre2 pattern
  std::vector<std::shared_ptr<const Regex>> chain_;
  bool ignore_merges_ = false;
};

}  // namespace kvserve
