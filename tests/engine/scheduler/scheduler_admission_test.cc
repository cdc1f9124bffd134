// Admission and cancellation: requests that can never fit are rejected with the page
// counts, a full waiting queue rejects, aborts free pages at once (also mid-prefill),
// and the running requests are unaffected; the threaded Engine does the same.
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "engine/kv/kv_memory.h"
#include "engine/model/model_loader.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/scheduler/engine.h"
#include "engine/scheduler/scheduler.h"
#include "tests/engine/scheduler/scheduler_test_util.h"
#include "tests/engine/tiny_model.h"

namespace kvserve {
namespace {

class SchedulerAdmissionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kvserve::testing::MakeTinyModel(3, &model_, &tokenizer_, &backend_);
    if (HasFatalFailure()) return;
  }

  EngineRequest Request(int prompt_len, int max_new, std::shared_ptr<Collected> sink) {
    EngineRequest r;
    for (int i = 0; i < prompt_len; ++i) r.prompt.push_back(10 + i % 300);
    r.max_new_tokens = max_new;
    r.ignore_eos = true;
    r.sink = CollectInto(std::move(sink));
    return r;
  }

  absl::StatusOr<std::unique_ptr<Engine>> StartEngine(int64_t num_pages, int64_t page_size, int64_t prefill_chunk) {
    EngineConfig config;
    config.num_pages = num_pages;
    config.page_size = page_size;
    config.scheduler.prefill_chunk = prefill_chunk;
    return Engine::Start(*model_, *tokenizer_, *backend_, config);
  }

  GenerationResult Reference(int prompt_len, int max_new, int64_t page_size, int64_t chunk) {
    EngineRequest r = Request(prompt_len, max_new, std::make_shared<Collected>());
    GenerationOptions o;
    o.max_new_tokens = max_new;
    o.ignore_eos = true;
    o.page_size = page_size;
    o.prefill_chunk = chunk;
    auto g = Generate(*model_, *tokenizer_, *backend_, r.prompt, o, {}, true);
    EXPECT_TRUE(g.ok());
    return *g;
  }

  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Backend> backend_;
};

TEST_F(SchedulerAdmissionTest, NeverFittingRequestIsRejectedAndRunningOnesAreUnaffected) {
  // tiny has 2 layers; 24 pages of 4 slots.
  PagePool pool({24, 4, model_->config.n_kv_heads, model_->config.head_dim});
  SchedulerConfig config;
  config.prefill_chunk = 5;
  Scheduler sched(*model_, *tokenizer_, *backend_, pool, config);
  auto running = std::make_shared<Collected>();
  ASSERT_TRUE(sched.Submit(Request(12, 6, running)).ok());
  ASSERT_TRUE(sched.StepAndDeliver().ok());
  absl::StatusOr<RequestHandle> huge = sched.Submit(Request(40, 10, std::make_shared<Collected>()));
  ASSERT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(huge.status().message().find("needs 26 KV pages"), std::string::npos) << huge.status();
  EXPECT_NE(huge.status().message().find("only 24 pages"), std::string::npos) << huge.status();
  EXPECT_FALSE(IsQueueFull(huge.status())) << "it can never fit: no retry helps";
  while (!sched.idle()) ASSERT_TRUE(sched.StepAndDeliver().ok());
  ExpectSameGreedy(Reference(12, 6, 4, 5), *running, 1e-3f, "running request");
  EXPECT_EQ(pool.stats().pages_used, 0);
}

TEST_F(SchedulerAdmissionTest, FullWaitingQueueRejectsAndQueueDrainsInOrder) {
  PagePool pool({10, 4, model_->config.n_kv_heads, model_->config.head_dim});  // one request at a time
  SchedulerConfig config;
  config.max_waiting = 1;
  Scheduler sched(*model_, *tokenizer_, *backend_, pool, config);
  auto a = std::make_shared<Collected>(), b = std::make_shared<Collected>();
  ASSERT_TRUE(sched.Submit(Request(10, 4, a)).ok());
  ASSERT_TRUE(sched.Submit(Request(10, 4, b)).ok());
  EXPECT_EQ(sched.num_running(), 1);
  EXPECT_EQ(sched.num_waiting(), 1);
  absl::StatusOr<RequestHandle> c = sched.Submit(Request(10, 4, std::make_shared<Collected>()));
  ASSERT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(c.status().message().find("--max-waiting 1"), std::string::npos) << c.status();
  EXPECT_TRUE(IsQueueFull(c.status())) << "backpressure is told apart by its payload, not its text";
  while (!sched.idle()) ASSERT_TRUE(sched.StepAndDeliver().ok());
  EXPECT_EQ(a->tokens.size(), 4u);
  EXPECT_EQ(b->tokens, a->tokens);
}

TEST_F(SchedulerAdmissionTest, AbortMidPrefillFreesPagesAtOnce) {
  PagePool pool({100, 4, model_->config.n_kv_heads, model_->config.head_dim});
  SchedulerConfig config;
  config.prefill_chunk = 4;
  Scheduler sched(*model_, *tokenizer_, *backend_, pool, config);
  auto keep = std::make_shared<Collected>(), cancel = std::make_shared<Collected>();
  ASSERT_TRUE(sched.Submit(Request(6, 8, keep)).ok());
  ASSERT_TRUE(sched.StepAndDeliver().ok());
  const PagePoolStats before = pool.stats();
  absl::StatusOr<RequestHandle> h = sched.Submit(Request(30, 8, cancel));
  ASSERT_TRUE(h.ok());
  ASSERT_TRUE(sched.StepAndDeliver().ok());  // 4 of 30 prompt tokens in
  EXPECT_GT(pool.stats().pages_used, before.pages_used + 1);
  ASSERT_TRUE(sched.Abort(*h).ok());
  for (const SinkDelivery& d : sched.TakeDeliveries()) (*d.sink)(d.event);
  EXPECT_EQ(pool.stats().pages_reserved, before.pages_reserved);
  EXPECT_LE(pool.stats().pages_used, before.pages_used + 2);  // `keep` may have grown by a page per layer
  EXPECT_TRUE(sched.CheckInvariants().ok());
  EXPECT_TRUE(cancel->finished);
  EXPECT_EQ(cancel->status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(sched.Abort(*h).code(), absl::StatusCode::kNotFound);
  while (!sched.idle()) ASSERT_TRUE(sched.StepAndDeliver().ok());
  ExpectSameGreedy(Reference(6, 8, 4, 4), *keep, 1e-3f, "surviving request");
  EXPECT_EQ(pool.stats().pages_used, 0);
}

TEST_F(SchedulerAdmissionTest, ThreadedEngineStreamsAndAborts) {
  auto engine = StartEngine(200, 4, 6);
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::mutex mu;
  std::condition_variable cv;
  int finished = 0;
  std::vector<std::shared_ptr<Collected>> got;
  std::vector<RequestHandle> handles;
  for (int i = 0; i < 4; ++i) {
    got.push_back(std::make_shared<Collected>());
    EngineRequest r = Request(5 + 7 * i, i == 3 ? 100 : 6, got.back());
    RequestSink inner = std::move(r.sink);
    r.sink = [&, inner](const StreamEvent& e) {
      inner(e);
      if (e.finished) {
        std::lock_guard<std::mutex> lock(mu);
        ++finished;
        cv.notify_all();
      }
    };
    auto h = (*engine)->Submit(std::move(r));
    ASSERT_TRUE(h.ok()) << h.status();
    handles.push_back(*h);
  }
  ASSERT_TRUE((*engine)->Abort(handles[3]).ok() || got[3]->finished);
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return finished == 4; }));
  }
  for (int i = 0; i < 3; ++i) ExpectSameGreedy(Reference(5 + 7 * i, 6, 4, 6), *got[i], 1e-3f, "request");
  EXPECT_EQ((*engine)->pool_stats().pages_used, 0);
  EXPECT_TRUE((*engine)->CheckInvariants().ok());
  absl::StatusOr<std::unique_ptr<Engine>> bad = Engine::Start(*model_, *tokenizer_, *backend_, {0, 4, {}});
  EXPECT_NE(bad.status().message().find("got 0"), std::string::npos);
}

// While a long prompt prefills step after step, a Submit takes the engine lock at the next
// step boundary at the latest (std::mutex alone let the loop win it again and again: 20 s
// at 128K tokens), and stats() answers without waiting for a step.
TEST_F(SchedulerAdmissionTest, SubmitWaitsAtMostOneStepWhileALongPrefillRuns) {
  auto engine = StartEngine(4000, 4, 16);
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::atomic<int64_t> steps{0};
  (*engine)->SetStepObserver([&](const EngineStepStats&) { steps.fetch_add(1); });
  auto long_one = std::make_shared<Collected>();
  ASSERT_TRUE((*engine)->Submit(Request(3000, 1, long_one)).ok());
  while (steps.load() < 3) std::this_thread::yield();  // the prefill is under way

  int64_t most_steps = 0;
  std::vector<std::shared_ptr<Collected>> short_ones;
  for (int i = 0; i < 20; ++i) {
    const int64_t before = steps.load();
    const EngineStats stats = (*engine)->stats();
    EXPECT_GE(stats.running, 1);
    short_ones.push_back(std::make_shared<Collected>());
    ASSERT_TRUE((*engine)->Submit(Request(4, 2, short_ones.back())).ok());
    most_steps = std::max(most_steps, steps.load() - before);
  }
  const bool long_still_prefilling = long_one->tokens.empty();
  EXPECT_LE(most_steps, 2) << "a Submit waited for " << most_steps << " engine steps";
  EXPECT_TRUE(long_still_prefilling) << "the prompt was too short to keep the engine busy";
  for (int i = 0; i < 400 && !(long_one->finished && short_ones.back()->finished); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(long_one->finished);
  for (const auto& c : short_ones) EXPECT_EQ(c->tokens.size(), 2u);
}

}  // namespace
}  // namespace kvserve
