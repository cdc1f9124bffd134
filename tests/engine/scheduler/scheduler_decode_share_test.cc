// decode_share: while a long prompt prefills beside a decoding request, a share of the engine's
// time goes to steps without the long prompt's chunk. Checked with a fake clock on which every
// step takes the same time: at share 0.5, steps alternate, so the long prompt needs twice the
// steps; a short prompt still gets in at once; and every token is what Generate() gives.
#include "engine/kv/kv_memory.h"
#include "engine/scheduler/scheduler.h"
#include "tests/engine/scheduler/scheduler_test_util.h"
#include "tests/engine/tiny_model.h"

namespace kvserve {
namespace {

constexpr int64_t kPageSize = 4, kChunk = 64;

class DecodeShareTest : public ::testing::Test {
 protected:
  void SetUp() override { kvserve::testing::MakeTinyModel(5, &model_, &tokenizer_, &backend_); }

  std::vector<int32_t> Prompt(int n, int offset) const {
    std::vector<int32_t> p;
    for (int i = 0; i < n; ++i) p.push_back(10 + (i * 7 + offset) % 240);
    return p;
  }

  GenerationResult Reference(const std::vector<int32_t>& prompt, int max_new) {
    GenerationOptions o;
    o.max_new_tokens = max_new;
    o.ignore_eos = true;
    o.page_size = kPageSize;
    o.prefill_chunk = kChunk;
    auto g = Generate(*model_, *tokenizer_, *backend_, prompt, o, {}, /*keep_logits=*/true);
    EXPECT_TRUE(g.ok()) << g.status();
    return *std::move(g);
  }

  std::unique_ptr<Scheduler> MakeScheduler(double share) {
    pool_ = std::make_unique<PagePool>(
        PagePoolShape{4000, kPageSize, model_->config.n_kv_heads, model_->config.head_dim});
    SchedulerConfig config;
    config.prefill_chunk = kChunk;
    config.decode_share = share;
    fake_now_ = 0;
    config.clock = [this] { return fake_now_ += 0.5; };  // two reads a step: each step takes 0.5 s
    return std::make_unique<Scheduler>(*model_, *tokenizer_, *backend_, *pool_, config);
  }

  std::shared_ptr<Collected> Submit(Scheduler& s, const std::vector<int32_t>& prompt, int max_new) {
    auto got = std::make_shared<Collected>();
    EngineRequest r;
    r.prompt = prompt;
    r.max_new_tokens = max_new;
    r.ignore_eos = true;
    r.sink = CollectInto(got);
    EXPECT_TRUE(s.Submit(std::move(r)).ok());
    return got;
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

  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<PagePool> pool_;
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
