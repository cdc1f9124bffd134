// PCRE2-backed regex chains per pre-tokenizer family; see pretokenizer.h.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "engine/tokenizer/pretokenizer.h"

#include <pcre2.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/utf8.h"

namespace kvserve {
namespace {

// GPT-2: English contractions, optionally space-prefixed letter / number / symbol runs, and
// whitespace runs that leave their last space to prefix the next word.
constexpr std::string_view kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
// Every digit is a word of its own (SmolLM/StarCoder): applied before kGpt2.
constexpr std::string_view kSingleDigits = R"(\p{N})";
// Llama-3: case-insensitive contractions, a letter run may take one leading non-letter,
// numbers in groups of up to three, newlines kept together.
constexpr std::string_view kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2: Llama-3's pattern with single digits.
constexpr std::string_view kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

}  // namespace

struct PreTokenizer::Regex {
  pcre2_code* code = nullptr;
  ~Regex() { pcre2_code_free(code); }
};

absl::StatusOr<PreTokenizer> PreTokenizer::Create(std::string_view pre) {
  std::vector<std::string_view> patterns;
  bool ignore_merges = false;
  if (pre == "gpt2" || pre == "gpt-2") {
    patterns = {kGpt2};
  } else if (pre == "smollm" || pre == "starcoder" || pre == "refact" || pre == "codeshell") {
    patterns = {kSingleDigits, kGpt2};
  } else if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3") {
    patterns = {kLlama3};
    ignore_merges = true;
  } else if (pre == "qwen2" || pre == "deepseek-r1-qwen") {
    patterns = {kQwen2};
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "unsupported byte-level BPE pre-tokenizer '", std::string(pre),
        "' (supported: gpt2, smollm, starcoder, refact, codeshell, llama-bpe, qwen2)"));
  }
  PreTokenizer p;
  p.ignore_merges_ = ignore_merges;
  for (std::string_view pattern : patterns) {
    int err = 0;
    PCRE2_SIZE err_offset = 0;
    auto re = std::make_shared<Regex>();
    // MATCH_INVALID_UTF: user text may hold broken UTF-8; it must split, not fail.
    re->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                             PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err,
                             &err_offset, nullptr);
    if (re->code == nullptr) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof(msg));
      return absl::InternalError(absl::StrCat("pre-tokenizer regex '", std::string(pattern),
                                              "' failed to compile at ", err_offset, ": ",
                                              reinterpret_cast<const char*>(msg)));
    }
    // JIT is a large speedup on 128K-token prompts; fall back to the interpreter if absent.
    pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE);
    p.chain_.push_back(std::move(re));
  }
  return p;
}

void PreTokenizer::Split(std::string_view text, std::vector<std::string_view>& out) const {
  std::vector<std::string_view> current = {text};
  std::vector<std::string_view> next;
  for (const auto& re : chain_) {
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(re->code, nullptr);
    next.clear();
    for (std::string_view piece : current) {
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
      size_t offset = 0;
      size_t emitted = 0;  // end of the last piece pushed
      while (offset < piece.size()) {
        const int rc = pcre2_match(re->code, subject, piece.size(), offset, 0, md, nullptr);
        if (rc < 0) break;  // no more matches (or a match error): the rest is one gap
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        const size_t start = ov[0];
        size_t end = ov[1];
        if (start > emitted) next.push_back(piece.substr(emitted, start - emitted));
        if (end == start) {  // never expected with these patterns; step one character
          size_t p = start;
          utf8::NextCodepoint(piece, &p);
          end = p;
        }
        next.push_back(piece.substr(start, end - start));
        emitted = offset = end;
      }
      if (emitted < piece.size()) next.push_back(piece.substr(emitted));
    }
    pcre2_match_data_free(md);
    current.swap(next);
  }
  out.insert(out.end(), current.begin(), current.end());
}

}  // namespace kvserve
