// GPT-2 byte-level alphabet: every byte maps to one printable code point so that byte-level
// BPE vocabularies can store arbitrary bytes as text (space -> "Ġ", newline -> "Ċ", ...).
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace kvserve {

// Raw bytes -> byte-level text (UTF-8 of the mapped code points).
std::string BytesToByteLevel(std::string_view bytes);

// Byte-level text -> raw bytes; nullopt when a code point is outside the alphabet
// (e.g. a user-defined token stored verbatim).
std::optional<std::string> ByteLevelToBytes(std::string_view text);

}  // namespace kvserve
