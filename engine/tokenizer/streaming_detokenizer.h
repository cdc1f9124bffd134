// Turns generated token ids into text one token at a time without ever emitting half of a
// UTF-8 character: byte-level tokens often split an emoji or CJK character across tokens.
#pragma once
#include <cstdint>
#include <string>

#include "engine/tokenizer/tokenizer.h"

namespace kvserve {

class StreamingDetokenizer {
 public:
  // Holds a (cheap, shared) copy of the tokenizer. Control tokens render as their text
  // unless `render_special` is false. Unlike Decode, no leading space is stripped: streamed
  // tokens continue a prompt, so a SentencePiece "▁word" really does start with a space.
  explicit StreamingDetokenizer(const Tokenizer& tokenizer, bool render_special = true);

  // Text that became complete with this token: whole, valid UTF-8 characters only. Bytes
  // of an unfinished character are held until a later token completes them.
  std::string Push(int32_t id);

  // Everything still held; bytes that never formed a character become U+FFFD.
  std::string Flush();

 private:
  Tokenizer tokenizer_;
  bool render_special_;
  std::string pending_;
};

}  // namespace kvserve
