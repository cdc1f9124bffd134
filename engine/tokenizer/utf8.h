// Small UTF-8 helpers shared by the tokenizers and the streaming detokenizer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kvserve::utf8 {

// Length in bytes of the UTF-8 sequence that starts with `lead`, from the lead byte alone;
// 1 for a continuation or invalid byte so callers always make progress.
inline size_t SequenceLength(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 1;
}

// Appends the UTF-8 encoding of code point `cp` (assumed valid) to `out`.
void AppendCodepoint(uint32_t cp, std::string& out);

// Decodes the code point at s[*pos] and advances *pos. Invalid bytes decode to themselves
// (as Latin-1) and advance by one, so arbitrary bytes never stall a loop.
uint32_t NextCodepoint(std::string_view s, size_t* pos);

// Length of the longest prefix of `s` that ends on a complete UTF-8 character boundary,
// treating an incomplete multi-byte sequence at the very end as "not yet complete".
// Invalid bytes in the middle count as complete (they will never become valid).
size_t CompletePrefixLength(std::string_view s);

}  // namespace kvserve::utf8

namespace kvserve::utf8 {

// Copies `s`, replacing every byte that is not part of a well-formed UTF-8 sequence
// (stray continuation, truncated sequence, overlong form, surrogate, > U+10FFFF) with
// U+FFFD, so the result is always valid UTF-8 (required by protobuf string fields).
std::string Sanitize(std::string_view s);

// True when Sanitize(s) would return `s` unchanged.
bool IsValid(std::string_view s);

}  // namespace kvserve::utf8
