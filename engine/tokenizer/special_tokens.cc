// Special-token splitting; see special_tokens.h.
#include "engine/tokenizer/special_tokens.h"

#include <algorithm>

namespace kvserve {
namespace {

bool IsSpecialType(TokenType t) {
  return t == TokenType::kControl || t == TokenType::kUserDefined || t == TokenType::kUnknown;
}

}  // namespace

SpecialTokenMatcher::SpecialTokenMatcher(const Vocab& vocab) : by_first_byte_(256) {
  for (int32_t id = 0; id < vocab.size(); ++id) {
    if (!IsSpecialType(vocab.types[id]) || vocab.tokens[id].empty()) continue;
    by_first_byte_[static_cast<unsigned char>(vocab.tokens[id][0])].push_back(id);
    any_ = true;
  }
  for (auto& bucket : by_first_byte_) {
    std::stable_sort(bucket.begin(), bucket.end(), [&](int32_t a, int32_t b) {
      return vocab.tokens[a].size() > vocab.tokens[b].size();
    });
  }
}

std::vector<TextSegment> SpecialTokenMatcher::Split(const Vocab& vocab, std::string_view text,
                                                    bool parse_special) const {
  if (!any_ || text.empty()) return {TextSegment{text, -1}};
  // Every occurrence of every eligible token, then accepted longest-token-first, leftmost
  // first, skipping any that overlap an accepted one. This is the order llama.cpp resolves
  // overlaps in, found in one pass instead of one text scan per special token.
  struct Hit {
    uint32_t pos, len;
    int32_t id;
  };
  std::vector<Hit> hits;
  for (size_t pos = 0; pos < text.size(); ++pos) {
    for (int32_t id : by_first_byte_[static_cast<unsigned char>(text[pos])]) {
      if (!parse_special && vocab.types[id] != TokenType::kUserDefined) continue;
      const std::string& t = vocab.tokens[id];
      if (text.compare(pos, t.size(), t) == 0) {
        hits.push_back({static_cast<uint32_t>(pos), static_cast<uint32_t>(t.size()), id});
      }
    }
  }
  if (hits.empty()) return {TextSegment{text, -1}};
  std::stable_sort(hits.begin(), hits.end(),
                   [](const Hit& a, const Hit& b) { return a.len > b.len; });
  std::vector<bool> taken(text.size(), false);
  std::vector<Hit> accepted;
  for (const Hit& h : hits) {
    bool free = true;
    for (uint32_t i = h.pos; i < h.pos + h.len && free; ++i) free = !taken[i];
    if (!free) continue;
    for (uint32_t i = h.pos; i < h.pos + h.len; ++i) taken[i] = true;
    accepted.push_back(h);
  }
  std::sort(accepted.begin(), accepted.end(),
            [](const Hit& a, const Hit& b) { return a.pos < b.pos; });
  std::vector<TextSegment> out;
  size_t cursor = 0;
  for (const Hit& h : accepted) {
    if (h.pos > cursor) out.push_back({text.substr(cursor, h.pos - cursor), -1});
    out.push_back({std::string_view(), h.id});
    cursor = h.pos + h.len;
  }
  if (cursor < text.size()) out.push_back({text.substr(cursor), -1});
  return out;
}

}  // namespace kvserve
