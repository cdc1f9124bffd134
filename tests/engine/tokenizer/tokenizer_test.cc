// Tokenizer tests: byte-level BPE ids identical to llama.cpp on the SmolLM2 GGUF for every
// golden string, SentencePiece BPE identical to llama.cpp on a small vocabulary, round
// trips, special-token handling, errors, and speed on 128K-token-scale input.
#include "engine/tokenizer/tokenizer.h"

#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/pretokenizer.h"
#include "gtest/gtest.h"
#include "tests/engine/tokenizer/tokenizer_test_util.h"

namespace kvserve {
namespace {

using ::kvserve::testing::ReadGoldenJson;
using ::kvserve::testing::SmolLm2Tokenizer;
using ::kvserve::testing::SpmTinySpec;

std::string Show(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) absl::StrAppend(&s, s.empty() ? "" : " ", id);
  return s;
}

TEST(TokenizerGoldenTest, SmolLm2MatchesLlamaCpp) {
  const Tokenizer* tok = SmolLm2Tokenizer();
  ASSERT_NE(tok, nullptr);
  const nlohmann::json golden = ReadGoldenJson("tests/golden/tokenizer_smollm2.json");
  int total = 0, identical = 0;
  for (const auto& c : golden["cases"]) {
    const std::string text = c["text"];
    const auto want_special = c["ids_parse_special"].get<std::vector<int32_t>>();
    const auto want_plain = c["ids_no_special"].get<std::vector<int32_t>>();
    const std::vector<int32_t> got_special = tok->Encode(text, false, true);
    const std::vector<int32_t> got_plain = tok->Encode(text, false, false);
    EXPECT_EQ(Show(got_special), Show(want_special)) << "parse_special, text: '" << text << "'";
    EXPECT_EQ(Show(got_plain), Show(want_plain)) << "no special, text: '" << text << "'";
    ++total;
    identical += (got_special == want_special && got_plain == want_plain);
    if (c["round_trips"]) {
      EXPECT_EQ(tok->Decode(got_plain), text);
      EXPECT_EQ(tok->Decode(got_special), text);
    }
    EXPECT_EQ(tok->Decode(want_plain), c["decoded"].get<std::string>()) << "text: '" << text << "'";
  }
  EXPECT_GE(total, 200);
  std::printf("[golden] SmolLM2 tokenizer: %d of %d strings identical to llama.cpp\n", identical,
              total);
}

// The same vocabulary under the Llama-3 and Qwen2 pre-tokenizers (and Llama-3's
// ignore_merges), tokenized by llama.cpp: checks those regex chains on the whole corpus.
TEST(TokenizerGoldenTest, PreTokenizerVariantsMatchLlamaCpp) {
  const nlohmann::json golden = ReadGoldenJson("tests/golden/tokenizer_smollm2_pre_variants.json");
  for (const auto& variant : golden["variants"]) {
    TokenizerSpec spec = ::kvserve::testing::SmolLm2TokenizerSpec();
    spec.pre = variant["pre"];
    absl::StatusOr<Tokenizer> tok = Tokenizer::Create(spec);
    ASSERT_TRUE(tok.ok()) << tok.status();
    int total = 0, identical = 0;
    for (const auto& c : variant["cases"]) {
      const std::string text = c["text"];
      const auto want_special = c["ids_parse_special"].get<std::vector<int32_t>>();
      const auto want_plain = c["ids_no_special"].get<std::vector<int32_t>>();
      const std::vector<int32_t> got_special = tok->Encode(text, false, true);
      const std::vector<int32_t> got_plain = tok->Encode(text, false, false);
      EXPECT_EQ(Show(got_special), Show(want_special)) << spec.pre << ", text: '" << text << "'";
      EXPECT_EQ(Show(got_plain), Show(want_plain)) << spec.pre << ", text: '" << text << "'";
      ++total;
      identical += (got_special == want_special && got_plain == want_plain);
    }
    std::printf("[golden] pre '%s': %d of %d strings identical to llama.cpp\n",
                spec.pre.c_str(), identical, total);
  }
}

TEST(TokenizerTest, SmolLm2Basics) {
  const Tokenizer* tok = SmolLm2Tokenizer();
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->vocab_size(), 49152);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_FALSE(tok->add_bos());
  // The model does not want BOS, so asking for it adds nothing.
  EXPECT_EQ(tok->Encode("Hi", true, true), tok->Encode("Hi", false, true));
  EXPECT_TRUE(tok->IsEndOfGeneration(2));  // <|im_end|>
  EXPECT_TRUE(tok->IsEndOfGeneration(0));  // <|endoftext|>
  EXPECT_FALSE(tok->IsEndOfGeneration(1));
  EXPECT_FALSE(tok->IsEndOfGeneration(tok->Encode("Hello", false, false)[0]));
  EXPECT_FALSE(tok->IsEndOfGeneration(-1));
  EXPECT_TRUE(tok->IsControl(1));
  EXPECT_EQ(tok->TokenBytes(1), "<|im_start|>");
  EXPECT_EQ(tok->TokenBytes(-5), "");
  EXPECT_EQ(tok->Encode("<|im_start|>user", false, true).front(), 1);
  EXPECT_EQ(tok->Decode(tok->Encode("<|im_start|>hi<|im_end|>", false, true), false), "hi");
}

// Stray bytes become U+FFFD (SmolLM2 has no byte token for 0xFF, and its unk is the
// <|endoftext|> control token, which must never come out of user text).
TEST(TokenizerTest, InvalidUtf8IsReplacedNotMappedToUnk) {
  const Tokenizer* tok = SmolLm2Tokenizer();
  ASSERT_NE(tok, nullptr);
  const std::string broken = "ok \xE4\xB8 \xFF\xFE end \x80";
  const std::string replaced =
      "ok \xEF\xBF\xBD\xEF\xBF\xBD \xEF\xBF\xBD\xEF\xBF\xBD end \xEF\xBF\xBD";
  const std::vector<int32_t> ids = tok->Encode(broken, false, false);
  EXPECT_EQ(ids, tok->Encode(replaced, false, false));
  EXPECT_EQ(tok->Decode(ids), replaced);
  for (int32_t id : ids) EXPECT_FALSE(tok->IsControl(id)) << id;
}

// A long prompt must encode quickly: the heap-based merge is O(n log n) even for one
// enormous "word", and the word cache makes ordinary text cheap.
TEST(TokenizerTest, LongInputsEncodeFast) {
  const Tokenizer* tok = SmolLm2Tokenizer();
  ASSERT_NE(tok, nullptr);
  std::string text;
  const std::string para =
      "The quick brown fox jumps over the lazy dog; 1234567 numbers, emoji 😀, 中文 text. ";
  while (text.size() < 600 * 1000) text += para;
  std::string one_word(200 * 1000, 'x');
  one_word[1000] = 'y';
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = tok->Encode(text, false, true);
  const std::vector<int32_t> word_ids = tok->Encode(one_word, false, true);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GT(ids.size(), 128u * 1000u);
  EXPECT_EQ(tok->Decode(ids), text);
  EXPECT_EQ(tok->Decode(word_ids), one_word);
  std::printf("[perf] %zu + %zu tokens encoded in %.3f s\n", ids.size(), word_ids.size(), seconds);
  EXPECT_LT(seconds, 10.0);  // generous: shared CI machines; typical is well under 1 s
}

TEST(TokenizerGoldenTest, SentencePieceMatchesLlamaCpp) {
  const nlohmann::json golden = ReadGoldenJson("tests/golden/tokenizer_spm_tiny.json");
  absl::StatusOr<Tokenizer> tok = Tokenizer::Create(SpmTinySpec(golden["vocab"]));
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_TRUE(tok->adds_space_prefix());
  for (const auto& c : golden["cases"]) {
    const std::string text = c["text"];
    const auto want_bos = c["ids_parse_special_bos"].get<std::vector<int32_t>>();
    const auto want_plain = c["ids_no_special"].get<std::vector<int32_t>>();
    EXPECT_EQ(Show(tok->Encode(text, true, true)), Show(want_bos)) << "text: '" << text << "'";
    EXPECT_EQ(Show(tok->Encode(text, false, false)), Show(want_plain)) << "text: '" << text << "'";
    // llama.cpp's per-token pieces keep the prefix space; Decode removes it once.
    std::string decoded = c["decoded"];
    if (!decoded.empty() && decoded[0] == ' ') decoded.erase(0, 1);
    EXPECT_EQ(tok->Decode(want_plain), decoded) << "text: '" << text << "'";
  }
}

TEST(TokenizerTest, SentencePieceHandDerived) {
  const nlohmann::json golden = ReadGoldenJson("tests/golden/tokenizer_spm_tiny.json");
  const TokenizerSpec spec = SpmTinySpec(golden["vocab"]);
  absl::StatusOr<Tokenizer> tok = Tokenizer::Create(spec);
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto id = [&](const std::string& piece) {
    for (size_t i = 0; i < spec.tokens.size(); ++i) {
      if (spec.tokens[i] == piece) return static_cast<int32_t>(i);
    }
    return -1;
  };
  // "▁hello" is one piece; the second space before "world" stays a lone "▁".
  EXPECT_EQ(tok->Encode("hello  world", false, false),
            (std::vector<int32_t>{id("▁hello"), id("▁"), id("▁world")}));
  // "好" is not in the vocabulary: its three UTF-8 bytes become <0xE5> <0xA5> <0xBD>.
  EXPECT_EQ(tok->Encode("好", false, false),
            (std::vector<int32_t>{id("▁"), id("<0xE5>"), id("<0xA5>"), id("<0xBD>")}));
  EXPECT_EQ(tok->Decode(tok->Encode("好", false, false)), "好");
  // User-defined tokens are matched even without parse_special; control tokens are not.
  EXPECT_EQ(tok->Encode("<tool>", false, false)[0], id("<tool>"));
  EXPECT_NE(tok->Encode("</s>", false, false)[0], id("</s>"));
  EXPECT_EQ(tok->Encode("a", true, false).front(), 1);  // add_bos
  // One 600 KB fragment is a single merge problem for SentencePiece; the heap keeps it fast.
  std::string longtext;
  while (longtext.size() < 600 * 1000) longtext += "hello world the crack 好 ";
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = tok->Encode(longtext, false, false);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(tok->Decode(ids), longtext);
  EXPECT_LT(seconds, 10.0);
}

TEST(TokenizerTest, CreateRejectsBadSpecs) {
  TokenizerSpec spec;
  EXPECT_EQ(Tokenizer::Create(spec).status().code(), absl::StatusCode::kInvalidArgument);
  spec.tokens = {"a", "b"};
  spec.model = "wordpiece";
  absl::Status st = Tokenizer::Create(spec).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("wordpiece"), std::string::npos) << st;
  spec.model = "gpt2";
  spec.pre = "klingon";
  st = Tokenizer::Create(spec).status();
  EXPECT_NE(st.message().find("klingon"), std::string::npos) << st;
  spec.pre = "gpt2";
  spec.bos_id = 7;
  st = Tokenizer::Create(spec).status();
  EXPECT_NE(st.message().find("bos id 7"), std::string::npos) << st;
  spec.bos_id = -1;
  spec.merges = {"ab"};
  st = Tokenizer::Create(spec).status();
  EXPECT_NE(st.message().find("'ab'"), std::string::npos) << st;
  spec.merges = {"a b"};
  EXPECT_TRUE(Tokenizer::Create(spec).ok());
}

// Each family's regex chain, checked piece by piece on hand-derived splits.
std::vector<std::string> Pieces(std::string_view pre, std::string_view text) {
  absl::StatusOr<PreTokenizer> p = PreTokenizer::Create(pre);
  EXPECT_TRUE(p.ok()) << p.status();
  std::vector<std::string_view> views;
  if (p.ok()) p->Split(text, views);
  return std::vector<std::string>(views.begin(), views.end());
}

TEST(PreTokenizerTest, FamiliesSplitAsTheirRegexes) {
  using V = std::vector<std::string>;
  const std::string text = "Hello world's 12345  x\n\ny";
  EXPECT_EQ(Pieces("gpt2", text),
            (V{"Hello", " world", "'s", " 12345", " ", " x", "\n", "\n", "y"}));
  EXPECT_EQ(Pieces("smollm", text), (V{"Hello", " world", "'s", " ", "1", "2", "3", "4", "5",
                                       " ", " x", "\n", "\n", "y"}));
  EXPECT_EQ(Pieces("llama-bpe", text),
            (V{"Hello", " world", "'s", " ", "123", "45", " ", " x", "\n\n", "y"}));
  EXPECT_EQ(Pieces("qwen2", text), (V{"Hello", " world", "'s", " ", "1", "2", "3", "4", "5",
                                      " ", " x", "\n\n", "y"}));
  // Llama-3 contractions ignore case; GPT-2's do not.
  EXPECT_EQ(Pieces("llama-bpe", "I'M"), (V{"I", "'M"}));
  EXPECT_EQ(Pieces("gpt2", "I'M"), (V{"I", "'", "M"}));
  EXPECT_EQ(Pieces("gpt2", ""), V{});
  EXPECT_FALSE(PreTokenizer::Create("nonsense").ok());
}

// Huge runs must not hit a regex engine limit (which would silently stop splitting).
TEST(PreTokenizerTest, HugeRunsSplitCorrectly) {
  using V = std::vector<std::string>;
  const std::string spaces(100000, ' '), bangs(100000, '!'), newlines(100000, '\n');
  for (const char* pre : {"smollm", "llama-bpe", "qwen2"}) {
    EXPECT_EQ(Pieces(pre, "a" + spaces + "b"), (V{"a", spaces.substr(1), " b"})) << pre;
    EXPECT_EQ(Pieces(pre, "a" + bangs + "b"), (V{"a", bangs, "b"})) << pre;
  }
  EXPECT_EQ(Pieces("llama-bpe", "a" + newlines + "b"), (V{"a", newlines, "b"}));
  EXPECT_EQ(Pieces("gpt2", "a" + newlines + "b"), (V{"a", newlines.substr(1), "\n", "b"}));
}

// With ignore_merges (Llama-3), a word that is itself a token is emitted whole even when
// the merge list could not build it.
TEST(TokenizerTest, Llama3IgnoreMergesEmitsWholeWords) {
  TokenizerSpec spec;
  spec.model = "gpt2";
  for (int b = 0; b < 256; ++b) spec.tokens.push_back(BytesToByteLevel(std::string(1, static_cast<char>(b))));
  spec.tokens.push_back(BytesToByteLevel(" world"));  // id 256, no merges lead to it
  spec.pre = "llama-bpe";
  absl::StatusOr<Tokenizer> llama3 = Tokenizer::Create(spec);
  ASSERT_TRUE(llama3.ok()) << llama3.status();
  EXPECT_EQ(llama3->Encode(" world", false, false), (std::vector<int32_t>{256}));
  spec.pre = "qwen2";
  absl::StatusOr<Tokenizer> qwen = Tokenizer::Create(spec);
  ASSERT_TRUE(qwen.ok()) << qwen.status();
  EXPECT_EQ(qwen->Encode(" world", false, false).size(), 6u);  // bytes: no merges
  EXPECT_EQ(qwen->Decode(qwen->Encode(" world", false, false)), " world");
}

}  // namespace
}  // namespace kvserve
