// A request's KV fields over the server's defaults: names parsed (unknown ones named), and a
// chat prompt's short last turn taken as the question in question-scored chunk mode only.
#include "engine/scheduler/scheduler.h"

#include "gtest/gtest.h"

namespace kvserve {
namespace {

CompressionSettings ChunkDefaults() {
  CompressionSettings d;
  d.policy = "snapkv";
  d.budget = 0.1;
  d.window = 16;
  d.at = CompressAt::kChunk;
  d.chunk_scoring = ChunkScoring::kQuestion;
  return d;
}

TEST(CompressionForTest, AShortLastChatTurnIsTheQuestion) {
  EngineRequest r;
  r.chat_question_tokens = 40;
  auto s = CompressionFor(r, ChunkDefaults());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->question_tokens, 40);
  // A turn holding a document is no question: the window stays.
  r.chat_question_tokens = kMaxChatQuestionTokens + 1;
  EXPECT_FALSE(CompressionFor(r, ChunkDefaults())->question_tokens.has_value());
  // The request's own span wins.
  r.chat_question_tokens = 40;
  r.kv_question_tokens = 7;
  EXPECT_EQ(CompressionFor(r, ChunkDefaults())->question_tokens, 7);
}

TEST(CompressionForTest, TheChatTurnIsIgnoredWhereNoQuestionIsProbed) {
  EngineRequest r;
  r.chat_question_tokens = 40;
  r.kv_compress_at = "prefill_end";
  auto s = CompressionFor(r, ChunkDefaults());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->at, CompressAt::kPrefillEnd);
  EXPECT_FALSE(s->question_tokens.has_value());
  EXPECT_TRUE(ValidateCompressionSettings(*s, 4).ok());  // would fail with a question span
  r.kv_compress_at.clear();
  r.kv_chunk_scoring = "window";
  s = CompressionFor(r, ChunkDefaults());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(s->question_tokens.has_value());
}

TEST(CompressionForTest, UnknownNamesAreNamed) {
  EngineRequest r;
  r.kv_compress_at = "sometimes";
  EXPECT_NE(CompressionFor(r, ChunkDefaults()).status().message().find("sometimes"), std::string_view::npos);
  r.kv_compress_at.clear();
  r.kv_chunk_scoring = "vibes";
  EXPECT_NE(CompressionFor(r, ChunkDefaults()).status().message().find("vibes"), std::string_view::npos);
}

}  // namespace
}  // namespace kvserve
