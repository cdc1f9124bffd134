// max_long_prefills: of the admitted prompts with more than one chunk left, only the oldest
// prefill in a step, so the first of several long prompts sent together answers first
// instead of all of them answering at the end. Checked by counting steps to each first token,
// the prompt tokens each step carried, and every token against Generate().
#include "tests/engine/scheduler/tiny_scheduler_test.h"

namespace kvserve {
namespace {

class LongPrefillsTest : public kvserve::testing::TinySchedulerTest {
 protected:
  std::unique_ptr<Scheduler> MakeScheduler(int64_t max_long_prefills) {
    SchedulerConfig config;
    config.max_long_prefills = max_long_prefills;
    return NewScheduler(config);
  }
};

TEST_F(LongPrefillsTest, TheOldestLongPromptAnswersFirstAndNoTokenChanges) {
  // Three prompts of 4 chunks each, sent together.
  const std::vector<std::vector<int32_t>> prompts = {Prompt(4 * kChunk, 1), Prompt(4 * kChunk, 2),
                                                     Prompt(4 * kChunk, 3)};
  std::vector<GenerationResult> refs;
  for (const auto& p : prompts) refs.push_back(Reference(p, 6));
  for (const int64_t limit : {0, 1}) {
    const std::string what = "max_long_prefills " + std::to_string(limit);
    auto sched = MakeScheduler(limit);
    std::vector<std::shared_ptr<Collected>> got;
    for (const auto& p : prompts) got.push_back(Submit(*sched, p, 6));
    ASSERT_EQ(sched->num_running(), 3) << "all admitted either way: the limit is on prefill, not admission";
    std::vector<int> first_token_step(3, 0);
    int64_t prompt_tokens = 0, most_in_a_step = 0;
    for (int step = 1; !sched->idle() && step < 1000; ++step) {
      ASSERT_TRUE(sched->StepAndDeliver().ok());
      prompt_tokens += sched->last_step().prefill_tokens;
      most_in_a_step = std::max(most_in_a_step, sched->last_step().prefill_tokens);
      for (int i = 0; i < 3; ++i) {
        if (first_token_step[i] == 0 && !got[i]->tokens.empty()) first_token_step[i] = step;
      }
    }
    EXPECT_EQ(prompt_tokens, 12 * kChunk) << what << ": the same chunks run";
    if (limit == 0) {
      EXPECT_EQ(first_token_step, (std::vector<int>{4, 4, 4})) << what << ": all advance together";
      EXPECT_EQ(most_in_a_step, 3 * kChunk) << what;
    } else {
      // The next prompt starts beside the previous one's last chunk (that chunk finishes it).
      EXPECT_EQ(first_token_step, (std::vector<int>{4, 7, 10})) << what << ": one after the other, oldest first";
      EXPECT_EQ(most_in_a_step, 2 * kChunk) << what;
    }
    for (int i = 0; i < 3; ++i) ExpectSameGreedy(refs[i], *got[i], 1e-3f, what + ", prompt " + std::to_string(i));
    EXPECT_EQ(pool_->stats().pages_used, 0) << what;
  }
}

TEST_F(LongPrefillsTest, APromptThatFitsOneChunkIsNotHeldBehindALongOne) {
  auto sched = MakeScheduler(1);
  auto first = Submit(*sched, Prompt(4 * kChunk, 1), 4);
  auto second = Submit(*sched, Prompt(4 * kChunk, 2), 4);
  auto chat = Submit(*sched, Prompt(kChunk, 3), 4);
  ASSERT_TRUE(sched->StepAndDeliver().ok());
  EXPECT_EQ(chat->tokens.size(), 1u) << "a one-chunk prompt goes in the first step";
  EXPECT_EQ(sched->last_step().prefill_tokens, 2 * kChunk) << "the oldest long prompt's chunk and the chat";
  EXPECT_TRUE(first->tokens.empty());
  EXPECT_TRUE(second->tokens.empty());
}

TEST_F(LongPrefillsTest, ANegativeLimitIsRefusedByName) {
  SchedulerConfig c;
  c.max_long_prefills = -1;
  const absl::Status st = ValidateSchedulerConfig(c);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("--max-long-prefills"), std::string::npos) << st;
  EXPECT_NE(st.message().find("-1"), std::string::npos) << st;
}

}  // namespace
}  // namespace kvserve
