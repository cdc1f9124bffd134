// Logprobs on token events: the log-softmax of the raw logits, the top-n best first.
#include <cmath>

#include "engine/scheduler/scheduler.h"
#include "gtest/gtest.h"

namespace kvserve {
namespace {

TEST(TokenLogprobsTest, LogSoftmaxOfTheRawLogitsBestFirst) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f};
  const double lse = std::log(std::exp(1.0) + 2 * std::exp(3.0) + std::exp(2.0));
  StreamEvent e;
  TokenLogprobs(logits, 2, 3, &e);
  EXPECT_NEAR(e.logprob, 2.0 - lse, 1e-6);
  ASSERT_EQ(e.top_logprobs.size(), 3u);
  // Ties go to the lower id.
  EXPECT_EQ(e.top_logprobs[0].first, 1);
  EXPECT_EQ(e.top_logprobs[1].first, 3);
  EXPECT_EQ(e.top_logprobs[2].first, 2);
  EXPECT_NEAR(e.top_logprobs[0].second, 3.0 - lse, 1e-6);
  EXPECT_NEAR(e.top_logprobs[2].second, e.logprob, 1e-7);
  TokenLogprobs(logits, 0, 10, &e);
  EXPECT_EQ(e.top_logprobs.size(), 4u) << "capped at the vocabulary";
}

}  // namespace
}  // namespace kvserve

#include "engine/model/model_loader.h"
#include "engine/tokenizer/tokenizer.h"

namespace kvserve {
namespace {

TEST(QueueTimeTest, ARequestThatWaitsForPagesReportsItsWait) {
  auto model = MakeRandomModel("tiny", 3);
  ASSERT_TRUE(model.ok());
  auto tok = Tokenizer::Create(model->tokenizer);
  ASSERT_TRUE(tok.ok());
  auto backend = MakeCpuBackend();
  // Each request needs 2 layers x 4 pages: the pool holds one at a time.
  PagePool pool({10, 16, model->config.n_kv_heads, model->config.head_dim});
  Scheduler sched(*model, *tok, *backend, pool, SchedulerConfig{});
  std::vector<StreamEvent> last(2);
  for (int i = 0; i < 2; ++i) {
    EngineRequest r;
    for (int j = 0; j < 40; ++j) r.prompt.push_back(10 + j);
    r.max_new_tokens = 20;
    r.ignore_eos = true;
    r.top_logprobs = 2;
    r.sink = [&last, i](const StreamEvent& e) {
      if (e.finished) last[i] = e;
      if (e.token >= 0) {
        EXPECT_EQ(e.top_logprobs.size(), 2u);
      }
    };
    ASSERT_TRUE(sched.Submit(std::move(r)).ok());
  }
  ASSERT_EQ(sched.num_waiting(), 1);
  while (!sched.idle()) ASSERT_TRUE(sched.StepAndDeliver().ok());
  EXPECT_GT(last[1].queue_seconds, 0.0);
  EXPECT_GT(last[1].queue_seconds, last[0].queue_seconds) << "the second waited for the first to finish";
}

TEST(QueueTimeTest, TopLogprobsOutOfRangeIsRejected) {
  auto model = MakeRandomModel("tiny", 3);
  ASSERT_TRUE(model.ok());
  auto tok = Tokenizer::Create(model->tokenizer);
  ASSERT_TRUE(tok.ok());
  auto backend = MakeCpuBackend();
  PagePool pool({64, 16, model->config.n_kv_heads, model->config.head_dim});
  Scheduler sched(*model, *tok, *backend, pool, SchedulerConfig{});
  EngineRequest r;
  r.prompt = {1, 2, 3};
  r.top_logprobs = -1;
  const auto h = sched.Submit(std::move(r));
  EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(h.status().message().find("top_logprobs"), std::string_view::npos);
}

}  // namespace
}  // namespace kvserve
