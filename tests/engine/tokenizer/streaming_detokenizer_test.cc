// StreamingDetokenizer: token-by-token output never splits a UTF-8 character, always is
// valid UTF-8, and concatenates to the full decode.
#include "engine/tokenizer/streaming_detokenizer.h"

#include <string>
#include <vector>

#include "engine/tokenizer/utf8.h"
#include "gtest/gtest.h"
#include "tests/engine/tokenizer/tokenizer_test_util.h"

namespace kvserve {
namespace {

using ::kvserve::testing::ReadGoldenJson;
using ::kvserve::testing::SmolLm2Tokenizer;
using ::kvserve::testing::SpmTinySpec;

bool IsValidUtf8(const std::string& s) { return utf8::Sanitize(s) == s; }

TEST(StreamingDetokenizerTest, NeverSplitsCharacters) {
  const Tokenizer* tok = SmolLm2Tokenizer();
  ASSERT_NE(tok, nullptr);
  int held_back = 0;  // pushes that had to wait for the rest of a character
  for (const std::string text :
       {"Hello 👋 world 🌍", "👨‍👩‍👧‍👦 family", "你好，世界！日本語のテキスト", "🧑🏿‍🚀🏳️‍🌈🇺🇸",
        "mixed ascii, Привет, नमस्ते, ภาษาไทย, 😀😃😄", "𠜎𠜱𠝹𠱓"}) {
    StreamingDetokenizer detok(*tok);
    std::string streamed;
    for (int32_t id : tok->Encode(text, false, false)) {
      const std::string piece = detok.Push(id);
      EXPECT_TRUE(IsValidUtf8(piece)) << "token " << id << " of '" << text << "'";
      if (piece.empty()) ++held_back;
      streamed += piece;
    }
    streamed += detok.Flush();
    EXPECT_EQ(streamed, text);
  }
  EXPECT_GT(held_back, 0) << "the test text should include characters split across tokens";
}

TEST(StreamingDetokenizerTest, FlushReplacesUnfinishedBytes) {
  const Tokenizer* tok = SmolLm2Tokenizer();
  ASSERT_NE(tok, nullptr);
  // The first token of a 4-byte emoji is a partial character on its own.
  const std::vector<int32_t> ids = tok->Encode("😀", false, false);
  ASSERT_GT(ids.size(), 1u);
  StreamingDetokenizer detok(*tok);
  EXPECT_EQ(detok.Push(ids[0]), "");
  const std::string rest = detok.Flush();
  EXPECT_TRUE(IsValidUtf8(rest));
  EXPECT_NE(rest.find("\xEF\xBF\xBD"), std::string::npos);
  EXPECT_EQ(detok.Flush(), "");
}

TEST(StreamingDetokenizerTest, SpecialTokensCanBeHidden) {
  const Tokenizer* tok = SmolLm2Tokenizer();
  ASSERT_NE(tok, nullptr);
  StreamingDetokenizer shown(*tok), hidden(*tok, /*render_special=*/false);
  EXPECT_EQ(shown.Push(1), "<|im_start|>");
  EXPECT_EQ(hidden.Push(1), "");
}

TEST(StreamingDetokenizerTest, SentencePieceByteFallback) {
  const nlohmann::json golden = ReadGoldenJson("tests/golden/tokenizer_spm_tiny.json");
  absl::StatusOr<Tokenizer> tok = Tokenizer::Create(SpmTinySpec(golden["vocab"]));
  ASSERT_TRUE(tok.ok()) << tok.status();
  // "好" is spelled as three <0xNN> byte tokens after a "▁".
  const std::vector<int32_t> ids = tok->Encode("好 hello", false, false);
  StreamingDetokenizer detok(*tok);
  std::vector<std::string> pieces;
  for (int32_t id : ids) pieces.push_back(detok.Push(id));
  ASSERT_GE(pieces.size(), 5u);
  EXPECT_EQ(pieces[0], " ");  // streamed text keeps SentencePiece's leading space
  EXPECT_EQ(pieces[1], "");
  EXPECT_EQ(pieces[2], "");
  EXPECT_EQ(pieces[3], "好");
  EXPECT_EQ(pieces[4], " hello");
}

}  // namespace
}  // namespace kvserve
