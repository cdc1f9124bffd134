// Score-driven merging for SentencePiece BPE vocabularies; see sentencepiece_bpe.h.
#include "engine/tokenizer/sentencepiece_bpe.h"

#include <algorithm>
#include <cstdio>
#include <queue>

#include "engine/tokenizer/utf8.h"

namespace kvserve {

SentencePieceBpe::SentencePieceBpe(const Vocab& vocab) {
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    byte_ids_[b] = vocab.Find(name);
  }
}

void SentencePieceBpe::Encode(const Vocab& vocab, std::string_view text, int32_t unk_id,
                              std::vector<int32_t>& out) const {
  struct Symbol {
    int32_t prev, next;
    uint32_t begin, end;  // byte span in `text`; a merged-away symbol has begin == end
  };
  std::vector<Symbol> sym;
  sym.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const size_t begin = pos;
    // Whole UTF-8 characters are the initial pieces; a truncated sequence at the end is
    // taken as far as it goes.
    pos = std::min(text.size(), begin + utf8::SequenceLength(static_cast<unsigned char>(text[begin])));
    const int32_t i = static_cast<int32_t>(sym.size());
    sym.push_back({i - 1, i + 1, static_cast<uint32_t>(begin), static_cast<uint32_t>(pos)});
  }
  if (sym.empty()) return;
  sym.back().next = -1;

  // Highest score first; ties go to the leftmost pair. `len` detects stale entries: a pair
  // is still valid only if both symbols still span exactly the bytes it was scored on.
  struct Candidate {
    float score;
    int32_t left;
    uint32_t len;
    int32_t id;
    bool operator<(const Candidate& o) const {
      return score != o.score ? score < o.score : left > o.left;
    }
  };
  std::priority_queue<Candidate> heap;
  auto push = [&](int32_t left) {
    if (left < 0 || sym[left].next < 0) return;
    const Symbol& l = sym[left];
    const Symbol& r = sym[l.next];
    const int32_t id = vocab.Find(text.substr(l.begin, r.end - l.begin));
    if (id < 0) return;
    heap.push({vocab.scores[id], left, r.end - l.begin, id});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) push(i);

  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol& l = sym[c.left];
    if (l.begin == l.end || l.next < 0) continue;
    Symbol& r = sym[l.next];
    if (r.end - l.begin != c.len) continue;
    l.end = r.end;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = c.left;
    r.begin = r.end;
    push(l.prev);
    push(c.left);
  }

  for (int32_t i = 0; i >= 0; i = sym[i].next) {
    const std::string_view piece = text.substr(sym[i].begin, sym[i].end - sym[i].begin);
    const int32_t id = vocab.Find(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    // Only unmerged single characters can be missing: spell them as bytes.
    for (char ch : piece) {
      const int32_t b = byte_ids_[static_cast<unsigned char>(ch)];
      if (b >= 0) {
        out.push_back(b);
      } else if (unk_id >= 0) {
        out.push_back(unk_id);
      }
    }
  }
}

}  // namespace kvserve
