// A sequence's tail on hand-made logits: the token events and the final event it emits for
// each way a request ends, the text it holds back for a stop sequence, and the logits and
// logprobs it attaches on request.
#include "engine/scheduler/sequence_tail.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/engine/tokenizer/tokenizer_test_util.h"

namespace kvserve {
namespace {

using ::kvserve::testing::SmolLm2Tokenizer;

class SequenceTailTest : public ::testing::Test {
 protected:
  const Tokenizer& tok_ = *SmolLm2Tokenizer();
  // Greedy logits that pick `id`.
  std::vector<float> Pick(int32_t id) const {
    std::vector<float> l(static_cast<size_t>(tok_.vocab_size()), 0.0f);
    l[static_cast<size_t>(id)] = 5.0f;
    return l;
  }
  int32_t Id(const std::string& piece) const {
    const std::vector<int32_t> ids = tok_.Encode(piece, false, false);
    EXPECT_EQ(ids.size(), 1u) << piece;
    return ids.at(0);
  }
  EngineRequest Request() const {
    EngineRequest r;
    r.prompt = {1, 2, 3};
    r.max_new_tokens = 3;
    return r;
  }
};

TEST_F(SequenceTailTest, LengthEndsAfterTheLastTokenWithItsText) {
  EngineRequest r = Request();
  SequenceTail tail(r, tok_);
  const int32_t hello = Id("Hello");
  EXPECT_EQ(tail.Next(Pick(hello)).size(), 1u);
  EXPECT_EQ(tail.Next(Pick(hello)).size(), 1u);
  std::vector<StreamEvent> last = tail.Next(Pick(hello));
  ASSERT_EQ(last.size(), 2u);
  EXPECT_EQ(last[0].token, hello);
  EXPECT_TRUE(last[1].finished);
  EXPECT_EQ(last[1].finish_reason, FinishReason::kLength);
  EXPECT_EQ(tail.generated(), 3);
  EXPECT_EQ(tail.history(), (std::vector<int32_t>{1, 2, 3, hello, hello, hello}));
}

TEST_F(SequenceTailTest, EosEndsWithoutATokenAndKeepsItsLogits) {
  EngineRequest r = Request();
  r.keep_logits = true;
  SequenceTail tail(r, tok_);
  std::vector<StreamEvent> ev = tail.Next(Pick(tok_.eos_id()));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_TRUE(ev[0].finished);
  EXPECT_EQ(ev[0].finish_reason, FinishReason::kEos);
  EXPECT_EQ(ev[0].token, -1);
  EXPECT_EQ(ev[0].logits, Pick(tok_.eos_id()));
  EXPECT_EQ(tail.generated(), 0);
  // ignore_eos samples it as a token.
  r.ignore_eos = true;
  SequenceTail ignoring(r, tok_);
  ev = ignoring.Next(Pick(tok_.eos_id()));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].token, tok_.eos_id());
  EXPECT_FALSE(ev[0].finished);
}

TEST_F(SequenceTailTest, AStopTokenIsEmittedThenEnds) {
  EngineRequest r = Request();
  const int32_t stop = Id("Hello");
  r.stop_token_ids = {stop};
  r.top_logprobs = 2;
  SequenceTail tail(r, tok_);
  std::vector<StreamEvent> ev = tail.Next(Pick(stop));
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].token, stop);
  EXPECT_EQ(ev[0].text, "");
  ASSERT_EQ(ev[0].top_logprobs.size(), 2u);
  EXPECT_EQ(ev[0].top_logprobs[0].first, stop);
  EXPECT_LT(ev[0].logprob, 0.0f);
  EXPECT_TRUE(ev[0].logits.empty());  // only with keep_logits
  EXPECT_EQ(ev[1].finish_reason, FinishReason::kStopToken);
}

TEST_F(SequenceTailTest, AStopSequenceIsCutFromTheText) {
  EngineRequest r = Request();
  r.max_new_tokens = 10;
  r.stop_sequences = {" world"};
  SequenceTail tail(r, tok_);
  std::string text;
  std::vector<StreamEvent> ev = tail.Next(Pick(Id("Hello")));
  for (const StreamEvent& e : ev) text += e.text;
  ev = tail.Next(Pick(Id(" world")));
  for (const StreamEvent& e : ev) text += e.text;
  ASSERT_FALSE(ev.empty());
  EXPECT_TRUE(ev.back().finished);
  EXPECT_EQ(ev.back().finish_reason, FinishReason::kStopSequence);
  EXPECT_EQ(text, "Hello");
}

}  // namespace
}  // namespace kvserve
