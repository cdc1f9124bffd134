// Rank-ordered BPE merging of one pre-tokenized word (byte-level BPE, "gpt2" model).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tokenizer/vocab.h"

namespace kvserve {

class BpeMerges {
 public:
  // `merges` are "left right" pairs in rank order (index = rank), as in GGUF/tokenizer.json.
  // Both sides and their concatenation must be tokens of `vocab`; pairs that are not are
  // skipped (they could never produce a token anyway).
  static absl::StatusOr<BpeMerges> Create(const Vocab& vocab,
                                          const std::vector<std::string>& merges);

  // Merges the byte-level text `word` and appends its token ids. Symbols that end up outside
  // the vocabulary (impossible for complete byte-level vocabularies) become `unk_id` when
  // it is >= 0 and are dropped otherwise. O(n log n) in the word length via a heap.
  void EncodeWord(const Vocab& vocab, std::string_view word, int32_t unk_id,
                  std::vector<int32_t>& out) const;

 private:
  struct Merge {
    int32_t rank;
    int32_t result;
  };
  static uint64_t Key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  std::unordered_map<uint64_t, Merge> merges_;
};

}  // namespace kvserve
