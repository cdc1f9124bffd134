// The last user turn's span in a rendered SmolLM2 chat prompt: it decodes to that turn and
// the generation prompt, whatever came before.
#include "engine/tokenizer/chat_question.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/engine/tokenizer/tokenizer_test_util.h"

namespace kvserve {
namespace {

using ::kvserve::testing::SmolLm2Tokenizer;
using ::kvserve::testing::SmolLm2TokenizerSpec;

std::vector<int32_t> Rendered(const std::vector<ChatMessage>& messages) {
  const Tokenizer& tok = *SmolLm2Tokenizer();
  absl::StatusOr<std::string> text = RenderChat(SmolLm2TokenizerSpec(), messages, true);
  EXPECT_TRUE(text.ok()) << text.status();
  return tok.Encode(*text, tok.add_bos(), true);
}

TEST(ChatQuestionTest, TheSpanIsTheLastUserTurnAndTheGenerationPrompt) {
  const Tokenizer& tok = *SmolLm2Tokenizer();
  const std::vector<ChatMessage> messages = {
      {"system", "You read documents."},
      {"user", "Here is a long document about harbors and lanterns. The code is 4417."},
      {"assistant", "I have read it."},
      {"user", "What is the code?"}};
  const std::vector<int32_t> prompt = Rendered(messages);
  const int64_t n = LastUserTurnTokens(tok, SmolLm2TokenizerSpec(), messages, static_cast<int64_t>(prompt.size()));
  ASSERT_GT(n, 0);
  ASSERT_LT(n, static_cast<int64_t>(prompt.size()));
  const std::string tail = tok.Decode(std::vector<int32_t>(prompt.end() - n, prompt.end()), true);
  EXPECT_EQ(tail, "<|im_start|>user\nWhat is the code?<|im_end|>\n<|im_start|>assistant\n");
  // The same question after a longer history spans the same tokens.
  std::vector<ChatMessage> longer = messages;
  longer.insert(longer.begin() + 1, {{"user", "Another document, much longer than the first one."}, {"assistant", "Ok."}});
  const std::vector<int32_t> longer_prompt = Rendered(longer);
  EXPECT_EQ(LastUserTurnTokens(tok, SmolLm2TokenizerSpec(), longer, static_cast<int64_t>(longer_prompt.size())), n);
}

TEST(ChatQuestionTest, ASingleTurnIsWholeAndNoUserTurnIsNone) {
  const Tokenizer& tok = *SmolLm2Tokenizer();
  const std::vector<ChatMessage> one = {{"user", "Hello there."}};
  EXPECT_EQ(LastUserTurnTokens(tok, SmolLm2TokenizerSpec(), one, 30), 30);
  const std::vector<ChatMessage> none = {{"system", "Be brief."}, {"assistant", "Hi."}};
  EXPECT_EQ(LastUserTurnTokens(tok, SmolLm2TokenizerSpec(), none, 30), 0);
}

}  // namespace
}  // namespace kvserve
