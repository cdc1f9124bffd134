// Text <-> token ids for the model families kvserve serves: byte-level BPE ("gpt2" model:
// SmolLM2, Llama-3, Qwen2) and SentencePiece BPE ("llama" model: Mistral-7B-v0.3 style).
// Results match llama.cpp on the same GGUF (see tests/golden/make_tokenizer_golden.py).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/tokenizer/tokenizer_spec.h"

namespace kvserve {

class Tokenizer {
 public:
  // Fails (InvalidArgument, naming the value) on an unknown model or pre-tokenizer, empty
  // vocabulary, mismatched array sizes or out-of-range special ids.
  static absl::StatusOr<Tokenizer> Create(const TokenizerSpec& spec);

  // `add_bos`: prepend bos_id when the model wants one (add_bos() && bos_id() >= 0).
  // `parse_special`: text such as "<|im_start|>" becomes its control token; otherwise it is
  // spelled out as ordinary text. User-defined tokens are always recognized.
  // Invalid UTF-8 is replaced by U+FFFD first (as llama.cpp does).
  // Thread-safe; long prompts are linear-ish (heap-based merges, a shared word cache).
  std::vector<int32_t> Encode(std::string_view text, bool add_bos, bool parse_special) const;

  // Concatenated bytes of the tokens. Control tokens render as their text unless
  // `render_special` is false. For SentencePiece models the space that add_space_prefix put
  // in front of the first word is removed again, so Decode(Encode(s)) == s.
  std::string Decode(absl::Span<const int32_t> ids, bool render_special = true) const;

  // Raw bytes of one token (byte-level / U+2581 / <0xNN> decoding applied; control tokens
  // give their text). May be an incomplete UTF-8 sequence. Empty for out-of-range ids.
  std::string TokenBytes(int32_t id) const;

  int32_t vocab_size() const;
  int32_t bos_id() const;
  int32_t eos_id() const;
  bool add_bos() const;
  // eos, the spec's end-of-turn ids, and control tokens spelled like known end-of-turn
  // markers (<|eot_id|>, <|im_end|>, <|endoftext|>, ...), as llama.cpp's EOG set.
  bool IsEndOfGeneration(int32_t id) const;
  // Control/unknown token (not text a user would see); false for out-of-range ids.
  bool IsControl(int32_t id) const;
  // True for "llama" (SentencePiece) models whose encoder adds a leading space.
  bool adds_space_prefix() const;

 private:
  struct Impl;
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;  // shared: copies are cheap and share the word cache
};

}  // namespace kvserve

// Callers that stream generated text expect StreamingDetokenizer alongside Tokenizer.
// Included last so that either header may be included first.
#include "engine/tokenizer/streaming_detokenizer.h"  // IWYU pragma: export
