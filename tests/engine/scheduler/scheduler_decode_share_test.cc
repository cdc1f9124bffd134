// decode_share: while a long prompt prefills beside a decoding request, a share of the engine's
// time goes to steps without the long prompt's chunk. Checked with a fake clock on which every
// step takes the same time: at share 0.5, steps alternate, so the long prompt needs twice the
// steps; a short prompt still gets in at once; and every token is what Generate() gives.
#include "tests/engine/scheduler/tiny_scheduler_test.h"

namespace kvserve {
namespace {

class DecodeShareTest : public kvserve::testing::TinySchedulerTest {
 protected:
  std::unique_ptr<Scheduler> MakeScheduler(double share) {
    SchedulerConfig config;
    config.decode_share = share;
    fake_now_ = 0;
    config.clock = [this] { return fake_now_ += 0.5; };  // two reads a step: each step takes 0.5 s
    return NewScheduler(config);
  }

  // Steps until `c` has its first token; the number of steps that took. chunk_free counts
  // the steps that carried no prompt token (Scheduler::last_step, the step-time metric's phase).
  int StepsUntilFirstToken(Scheduler& s, const Collected& c, int* chunk_free = nullptr) {
    int steps = 0;
    while (c.tokens.empty() && steps < 1000) {
      EXPECT_TRUE(s.StepAndDeliver().ok());
      ++steps;
      EXPECT_GE(s.last_step().sequences, 1);
      if (chunk_free && s.last_step().prefill_tokens == 0) ++*chunk_free;
    }
    return steps;
  }

  double fake_now_ = 0;
};

TEST_F(DecodeShareTest, ChunkFreeStepsTakeTheirShareAndChangeNoToken) {
  const std::vector<int32_t> chat = Prompt(5, 1), long_prompt = Prompt(640, 3);  // 10 chunks
  const GenerationResult chat_ref = Reference(chat, 60), long_ref = Reference(long_prompt, 4);
  int steps_for_long[2] = {0, 0}, chunk_free[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    const double share = i == 0 ? 0.0 : 0.5;
    auto sched = MakeScheduler(share);
    auto chat_got = Submit(*sched, chat, 60);
    ASSERT_EQ(StepsUntilFirstToken(*sched, *chat_got), 1);  // it decodes from here on
    auto long_got = Submit(*sched, long_prompt, 4);
    steps_for_long[i] = StepsUntilFirstToken(*sched, *long_got, &chunk_free[i]);
    while (!sched->idle()) ASSERT_TRUE(sched->StepAndDeliver().ok());
    ExpectSameGreedy(chat_ref, *chat_got, 1e-3f, "chat, share " + std::to_string(share));
    ExpectSameGreedy(long_ref, *long_got, 1e-3f, "long prompt, share " + std::to_string(share));
    EXPECT_EQ(pool_->stats().pages_used, 0);
  }
  EXPECT_EQ(steps_for_long[0], 10) << "share 0: every step carries a chunk";
  // Share 0.5 on equal steps: chunk, chunk-free, chunk, ... so 10 chunks take 19 steps.
  EXPECT_EQ(steps_for_long[1], 19);
  EXPECT_EQ(chunk_free[0], 0);
  EXPECT_EQ(chunk_free[1], 9);
}

TEST_F(DecodeShareTest, AShortPromptIsPrefilledInAChunkFreeStep) {
  auto sched = MakeScheduler(0.5);
  auto decoding = Submit(*sched, Prompt(5, 1), 200);
  ASSERT_EQ(StepsUntilFirstToken(*sched, *decoding), 1);
  auto long_got = Submit(*sched, Prompt(640, 3), 4);
  ASSERT_TRUE(sched->StepAndDeliver().ok());  // a chunk step: the next one is chunk-free
  auto chat = Submit(*sched, Prompt(6, 2), 4);  // 6 tokens <= kChunk / 8
  EXPECT_EQ(StepsUntilFirstToken(*sched, *chat), 1);
  EXPECT_TRUE(long_got->tokens.empty());
}

TEST(DecodeShareConfigTest, OutOfRangeIsRejectedByName) {
  for (double bad : {-0.1, 0.95}) {
    SchedulerConfig c;
    c.decode_share = bad;
    const absl::Status st = ValidateSchedulerConfig(c);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(st.message().find("--decode-share"), std::string::npos) << st;
  }
}

}  // namespace
}  // namespace kvserve
