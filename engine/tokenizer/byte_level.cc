// The GPT-2 bytes<->unicode table, built once; see byte_level.h.
#include "engine/tokenizer/byte_level.h"

#include <array>
#include <cstdint>

#include "engine/tokenizer/utf8.h"

namespace kvserve {
namespace {

struct Tables {
  std::array<std::string, 256> byte_to_text;  // UTF-8 of the mapped code point
  std::array<int16_t, 324> cp_to_byte;        // mapped code points are all < 324; -1 = none
};

// Printable Latin-1 bytes map to themselves; the other 68 bytes are shifted to 256+ in
// byte order. This is the published GPT-2 scheme every byte-level vocabulary relies on.
const Tables& GetTables() {
  static const Tables* tables = [] {
    auto* t = new Tables();
    t->cp_to_byte.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      const uint32_t cp = printable ? static_cast<uint32_t>(b) : next++;
      utf8::AppendCodepoint(cp, t->byte_to_text[b]);
      t->cp_to_byte[cp] = static_cast<int16_t>(b);
    }
    return t;
  }();
  return *tables;
}

}  // namespace

std::string BytesToByteLevel(std::string_view bytes) {
  const Tables& t = GetTables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += t.byte_to_text[static_cast<unsigned char>(c)];
  return out;
}

std::optional<std::string> ByteLevelToBytes(std::string_view text) {
  const Tables& t = GetTables();
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const uint32_t cp = utf8::NextCodepoint(text, &pos);
    if (cp >= t.cp_to_byte.size() || t.cp_to_byte[cp] < 0) return std::nullopt;
    out.push_back(static_cast<char>(t.cp_to_byte[cp]));
  }
  return out;
}

}  // namespace kvserve
