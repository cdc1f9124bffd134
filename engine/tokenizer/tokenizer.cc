// Tokenizer: special-token splitting, then per-model encoding; see tokenizer.h.
#include "engine/tokenizer/tokenizer.h"

#include <cstdio>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/bpe_merges.h"
#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/pretokenizer.h"
#include "engine/tokenizer/sentencepiece_bpe.h"
#include "engine/tokenizer/special_tokens.h"
#include "engine/tokenizer/utf8.h"
#include "engine/tokenizer/vocab.h"

namespace kvserve {
namespace {

// Spellings llama.cpp also treats as end of generation when they are control tokens.
constexpr std::string_view kEndOfTurnTexts[] = {
    "<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
    "<|end_of_text|>", "<EOT>", "</s>",
};

// Words up to this length are cached; longer ones are rare and would bloat the cache.
constexpr size_t kMaxCachedWordBytes = 64;
constexpr size_t kMaxCacheEntries = 1 << 16;

std::string ReplaceAll(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(s.size() + s.size() / 2);
  size_t pos = 0;
  for (size_t at = s.find(from); at != std::string_view::npos; at = s.find(from, pos)) {
    out.append(s.substr(pos, at - pos));
    out.append(to);
    pos = at + from.size();
  }
  out.append(s.substr(pos));
  return out;
}

}  // namespace

struct Tokenizer::Impl {
  explicit Impl(const TokenizerSpec& s) : spec(s), vocab(s), specials(vocab) { spec.merges = {}; }

  TokenizerSpec spec;  // bos/eos/unk ids and flags
  Vocab vocab;
  SpecialTokenMatcher specials;
  bool spm = false;
  std::optional<PreTokenizer> pre;      // byte-level BPE only
  std::optional<BpeMerges> merges;      // byte-level BPE only
  std::optional<SentencePieceBpe> sp;   // SentencePiece only
  std::vector<std::string> token_bytes; // id -> decoded bytes
  std::vector<bool> end_of_generation;

  // Word -> ids cache for byte-level BPE; natural text repeats words constantly.
  mutable std::mutex cache_mu;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache;

  void EncodeBpeText(std::string_view text, std::vector<int32_t>& out) const;
};

void Tokenizer::Impl::EncodeBpeText(std::string_view text, std::vector<int32_t>& out) const {
  std::vector<std::string_view> words;
  pre->Split(text, words);
  std::string bl;
  std::vector<int32_t> ids;
  for (std::string_view w : words) {
    if (w.empty()) continue;
    const bool cacheable = w.size() <= kMaxCachedWordBytes;
    if (cacheable) {
      std::lock_guard<std::mutex> lock(cache_mu);
      auto it = cache.find(std::string(w));
      if (it != cache.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        continue;
      }
    }
    bl = BytesToByteLevel(w);
    ids.clear();
    const int32_t whole = pre->ignore_merges() ? vocab.Find(bl) : -1;
    if (whole >= 0) {
      ids.push_back(whole);
    } else {
      merges->EncodeWord(vocab, bl, spec.unk_id, ids);
    }
    out.insert(out.end(), ids.begin(), ids.end());
    if (cacheable) {
      std::lock_guard<std::mutex> lock(cache_mu);
      if (cache.size() >= kMaxCacheEntries) cache.clear();  // crude but bounded
      cache.emplace(std::string(w), ids);
    }
  }
}

absl::StatusOr<Tokenizer> Tokenizer::Create(const TokenizerSpec& spec) {
  const int64_t n = static_cast<int64_t>(spec.tokens.size());
  if (n == 0) return absl::InvalidArgumentError("tokenizer vocabulary is empty");
  if (!spec.types.empty() && static_cast<int64_t>(spec.types.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer has ", n, " tokens but ",
                                                   spec.types.size(), " token types"));
  }
  if (!spec.scores.empty() && static_cast<int64_t>(spec.scores.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer has ", n, " tokens but ", spec.scores.size(), " scores"));
  }
  for (auto [name, id] : {std::pair<const char*, int32_t>{"bos", spec.bos_id},
                          {"eos", spec.eos_id}, {"unk", spec.unk_id}, {"pad", spec.pad_id}}) {
    if (id >= n) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer ", name, " id ", id, " is outside the vocabulary of ", n));
    }
  }
  for (int32_t id : spec.eot_ids) {
    if (id < 0 || id >= n) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer end-of-turn id ", id, " is outside the vocabulary of ", n));
    }
  }

  auto impl = std::make_shared<Impl>(spec);
  // The vocabulary now lives in impl->vocab; drop the spec's copies of the big arrays.
  impl->spec.tokens = {};
  impl->spec.scores = {};
  impl->spec.types = {};
  if (spec.model == "gpt2") {
    auto pre = PreTokenizer::Create(spec.pre.empty() ? "gpt2" : spec.pre);
    if (!pre.ok()) return pre.status();
    impl->pre.emplace(*std::move(pre));
    auto merges = BpeMerges::Create(impl->vocab, spec.merges);  // spec's, not impl's copy
    if (!merges.ok()) return merges.status();
    impl->merges.emplace(*std::move(merges));
  } else if (spec.model == "llama") {
    impl->spm = true;
    impl->sp.emplace(impl->vocab);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "unsupported tokenizer model '", spec.model, "' (supported: gpt2, llama)"));
  }

  // Precompute every token's bytes: Decode and streaming then only concatenate.
  const Vocab& v = impl->vocab;
  impl->token_bytes.resize(n);
  for (int32_t id = 0; id < n; ++id) {
    const std::string& text = v.tokens[id];
    const TokenType t = v.types[id];
    std::string& b = impl->token_bytes[id];
    if (t == TokenType::kControl || t == TokenType::kUserDefined || t == TokenType::kUnknown ||
        t == TokenType::kUnused) {
      b = text;  // stored verbatim, not in the model's text encoding
    } else if (impl->spm) {
      unsigned int byte = 0;
      if (t == TokenType::kByte && text.size() == 6 && std::sscanf(text.c_str(), "<0x%02X>", &byte) == 1) {
        b = std::string(1, static_cast<char>(byte));
      } else {
        b = ReplaceAll(text, kSpmSpace, " ");
      }
    } else {
      std::optional<std::string> raw = ByteLevelToBytes(text);
      b = raw ? *std::move(raw) : text;
    }
  }

  impl->end_of_generation.assign(n, false);
  if (spec.eos_id >= 0) impl->end_of_generation[spec.eos_id] = true;
  for (int32_t id : spec.eot_ids) impl->end_of_generation[id] = true;
  for (std::string_view eot : kEndOfTurnTexts) {
    const int32_t id = v.Find(eot);
    if (id >= 0 && v.types[id] == TokenType::kControl) impl->end_of_generation[id] = true;
  }
  return Tokenizer(std::move(impl));
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_bos,
                                       bool parse_special) const {
  const Impl& m = *impl_;
  // Invalid UTF-8 becomes U+FFFD first, as in llama.cpp: raw stray bytes would otherwise map
  // to missing byte tokens (and then to unk, which is <|endoftext|> in some vocabularies).
  std::string sanitized;
  if (!utf8::IsValid(text)) {
    sanitized = utf8::Sanitize(text);
    text = sanitized;
  }
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_bos && m.spec.add_bos && m.spec.bos_id >= 0) out.push_back(m.spec.bos_id);
  bool after_special = true;  // SentencePiece prefixes a space at the start and after specials
  std::string buf;
  for (const TextSegment& seg : m.specials.Split(m.vocab, text, parse_special)) {
    if (seg.token >= 0) {
      out.push_back(seg.token);
      after_special = true;
      continue;
    }
    if (seg.text.empty()) continue;  // nothing to encode, and no SentencePiece prefix
    if (!m.spm) {
      m.EncodeBpeText(seg.text, out);
      continue;
    }
    buf.clear();
    if (m.spec.add_space_prefix && after_special) buf.append(kSpmSpace);
    buf.append(ReplaceAll(seg.text, " ", kSpmSpace));
    m.sp->Encode(m.vocab, buf, m.spec.unk_id, out);
    after_special = false;
  }
  return out;
}

std::string Tokenizer::Decode(absl::Span<const int32_t> ids, bool render_special) const {
  const Impl& m = *impl_;
  std::string out;
  bool first_text = true;
  for (int32_t id : ids) {
    if (id < 0 || id >= m.vocab.size()) continue;
    const TokenType t = m.vocab.types[id];
    const bool control = t == TokenType::kControl || t == TokenType::kUnknown;
    if (control && !render_special) continue;
    std::string_view b = m.token_bytes[id];
    if (m.spm && m.spec.add_space_prefix && first_text && !control && !b.empty() &&
        b[0] == ' ' && m.vocab.tokens[id].starts_with(kSpmSpace)) {
      b.remove_prefix(1);  // the space Encode added, not part of the text
    }
    if (!control) first_text = false;
    out.append(b);
  }
  return out;
}

std::string Tokenizer::TokenBytes(int32_t id) const {
  if (id < 0 || id >= impl_->vocab.size()) return {};
  return impl_->token_bytes[id];
}

int32_t Tokenizer::vocab_size() const { return impl_->vocab.size(); }
int32_t Tokenizer::bos_id() const { return impl_->spec.bos_id; }
int32_t Tokenizer::eos_id() const { return impl_->spec.eos_id; }
bool Tokenizer::add_bos() const { return impl_->spec.add_bos; }
bool Tokenizer::adds_space_prefix() const { return impl_->spm && impl_->spec.add_space_prefix; }

bool Tokenizer::IsEndOfGeneration(int32_t id) const {
  return id >= 0 && id < impl_->vocab.size() && impl_->end_of_generation[id];
}

bool Tokenizer::IsControl(int32_t id) const {
  if (id < 0 || id >= impl_->vocab.size()) return false;
  const TokenType t = impl_->vocab.types[id];
  return t == TokenType::kControl || t == TokenType::kUnknown;
}

}  // namespace kvserve
