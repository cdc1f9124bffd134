// Heap-driven BPE over a doubly linked list of symbols; see bpe_merges.h.
#include "engine/tokenizer/bpe_merges.h"

#include <queue>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/utf8.h"

namespace kvserve {

absl::StatusOr<BpeMerges> BpeMerges::Create(const Vocab& vocab,
                                            const std::vector<std::string>& merges) {
  BpeMerges m;
  m.merges_.reserve(merges.size() * 2);
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string& line = merges[rank];
    // Byte-level tokens never contain a raw space, so the first space separates the pair.
    const size_t sp = line.find(' ', 1);
    if (sp == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("BPE merge #", rank, " '", line, "' is not a 'left right' pair"));
    }
    const std::string_view left(line.data(), sp);
    const std::string_view right(line.data() + sp + 1, line.size() - sp - 1);
    const int32_t l = vocab.Find(left), r = vocab.Find(right);
    std::string merged(left);
    merged += right;
    const int32_t result = vocab.Find(merged);
    if (l < 0 || r < 0 || result < 0) continue;
    // emplace keeps the first (lowest) rank if a pair is listed twice.
    m.merges_.emplace(Key(l, r), Merge{static_cast<int32_t>(rank), result});
  }
  return m;
}

void BpeMerges::EncodeWord(const Vocab& vocab, std::string_view word, int32_t unk_id,
                           std::vector<int32_t>& out) const {
  struct Symbol {
    int32_t id;
    int32_t prev, next;  // -1 at the ends; a merged-away symbol has id == -2
    uint32_t begin, end; // byte span in `word`, for the out-of-vocabulary fallback
  };
  std::vector<Symbol> sym;
  sym.reserve(word.size());
  for (size_t pos = 0; pos < word.size();) {
    const size_t begin = pos;
    utf8::NextCodepoint(word, &pos);
    const int32_t i = static_cast<int32_t>(sym.size());
    sym.push_back({vocab.Find(word.substr(begin, pos - begin)), i - 1, i + 1,
                   static_cast<uint32_t>(begin), static_cast<uint32_t>(pos)});
  }
  if (sym.empty()) return;
  sym.back().next = -1;

  // Candidate merges: lowest rank first, then leftmost, which is the order BPE was trained
  // with. Entries go stale when a neighbour merges; they are re-checked when popped.
  struct Candidate {
    int32_t rank, left, left_id, right_id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto push = [&](int32_t left) {
    if (left < 0) return;
    const int32_t right = sym[left].next;
    if (right < 0 || sym[left].id < 0 || sym[right].id < 0) return;
    auto it = merges_.find(Key(sym[left].id, sym[right].id));
    if (it != merges_.end()) heap.push({it->second.rank, left, sym[left].id, sym[right].id});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) push(i);

  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol& l = sym[c.left];
    if (l.id != c.left_id || l.next < 0 || sym[l.next].id != c.right_id) continue;
    Symbol& r = sym[l.next];
    l.id = merges_.at(Key(c.left_id, c.right_id)).result;
    l.end = r.end;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = c.left;
    r.id = -2;
    push(l.prev);
    push(c.left);
  }

  for (int32_t i = 0; i >= 0; i = sym[i].next) {
    if (sym[i].id >= 0) {
      out.push_back(sym[i].id);
    } else if (unk_id >= 0) {
      out.push_back(unk_id);
    }
  }
}

}  // namespace kvserve
