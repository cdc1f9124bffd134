// UTF-8 encode/decode helpers; see utf8.h.
#include "engine/tokenizer/utf8.h"

namespace kvserve::utf8 {

void AppendCodepoint(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

uint32_t NextCodepoint(std::string_view s, size_t* pos) {
  const auto lead = static_cast<unsigned char>(s[*pos]);
  const size_t len = SequenceLength(lead);
  if (len == 1 || *pos + len > s.size()) {
    ++*pos;
    return lead;
  }
  uint32_t cp = lead & (0xFF >> (len + 1));
  for (size_t i = 1; i < len; ++i) {
    const auto c = static_cast<unsigned char>(s[*pos + i]);
    if ((c & 0xC0) != 0x80) {  // broken sequence: consume only the lead byte
      ++*pos;
      return lead;
    }
    cp = (cp << 6) | (c & 0x3F);
  }
  *pos += len;
  return cp;
}

size_t CompletePrefixLength(std::string_view s) {
  // Only the last (up to) 3 bytes can belong to an unfinished character.
  const size_t n = s.size();
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    const size_t len = SequenceLength(c);
    // A lead byte whose sequence would run past the end is incomplete; hold it back.
    return (len > back) ? n - back : n;
  }
  return n;
}

}  // namespace kvserve::utf8

namespace kvserve::utf8 {
namespace {

// Length of the well-formed sequence at s[pos], or 0 if it is not well formed.
size_t WellFormedLength(std::string_view s, size_t pos) {
  const auto c0 = static_cast<unsigned char>(s[pos]);
  if (c0 < 0x80) return 1;
  const size_t len = SequenceLength(c0);
  if (len == 1 || pos + len > s.size()) return 0;
  uint32_t cp = c0 & (0xFF >> (len + 1));
  for (size_t i = 1; i < len; ++i) {
    const auto c = static_cast<unsigned char>(s[pos + i]);
    if ((c & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (c & 0x3F);
  }
  static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

}  // namespace

bool IsValid(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    const size_t len = WellFormedLength(s, pos);
    if (len == 0) return false;
    pos += len;
  }
  return true;
}

std::string Sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    const size_t len = WellFormedLength(s, pos);
    if (len == 0) {
      out += "\xEF\xBF\xBD";
      ++pos;
    } else {
      out.append(s.substr(pos, len));
      pos += len;
    }
  }
  return out;
}

}  // namespace kvserve::utf8
