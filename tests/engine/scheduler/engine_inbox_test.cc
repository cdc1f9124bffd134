// Engine::Submit and Engine::Abort go through an inbox the loop drains between steps: they
// answer in milliseconds while a long step runs (they used to wait for the whole step), a
// bad or unqueueable request is still refused synchronously, an aborted request's pages are
// back after the step under way, and Stop gives up on a step that does not end.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "engine/scheduler/engine.h"
#include "tests/engine/scheduler/scheduler_test_util.h"
#include "tests/engine/tiny_model.h"

namespace kvserve {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The scheduler reads its clock inside every step, under the engine's step lock: a clock
// that sleeps makes each step as long as a real long prefill chunk, deterministically.
class SlowStep {
 public:
  std::function<double()> Clock() {
    return [this] {
      std::unique_lock<std::mutex> lock(mu_);
      in_step_ = true;
      cv_.notify_all();
      cv_.wait_for(lock, step_, [&] { return released_; });
      in_step_ = false;
      return ticks_ += 1.0;
    };
  }
  void set_step(std::chrono::milliseconds step) {
    std::lock_guard<std::mutex> lock(mu_);
    step_ = step;
  }
  // Blocks until a step is inside the clock (so the engine lock is held).
  bool WaitInStep(std::chrono::seconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return in_step_; });
  }
  bool in_step() {
    std::lock_guard<std::mutex> lock(mu_);
    return in_step_;
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::chrono::milliseconds step_{0};
  bool in_step_ = false;
  bool released_ = false;
  double ticks_ = 0;
};

class EngineInboxTest : public ::testing::Test {
 protected:
  void SetUp() override { kvserve::testing::MakeTinyModel(3, &model_, &tokenizer_, &backend_); }

  EngineRequest Request(int prompt_len, int max_new, std::shared_ptr<Collected> sink) {
    EngineRequest r;
    for (int i = 0; i < prompt_len; ++i) r.prompt.push_back(10 + i % 300);
    r.max_new_tokens = max_new;
    r.ignore_eos = true;
    r.sink = CollectInto(std::move(sink));
    return r;
  }

  absl::StatusOr<std::unique_ptr<Engine>> StartEngine(int64_t max_waiting) {
    EngineConfig config;
    config.num_pages = 400;
    config.page_size = 4;
    config.scheduler.prefill_chunk = 8;
    config.scheduler.max_waiting = max_waiting;
    config.scheduler.clock = slow_.Clock();
    return Engine::Start(*model_, *tokenizer_, *backend_, config);
  }

  // Polls the engine's published stats (never waits for a step) until done(stats) holds.
  template <typename Pred>
  bool WaitStats(Engine& engine, Pred done, std::chrono::seconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      if (done(engine.stats())) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
  }

  SlowStep slow_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Backend> backend_;
};

TEST_F(EngineInboxTest, SubmitAndAbortAnswerWhileAStepRunsAndPagesAreBackAfterIt) {
  slow_.set_step(std::chrono::milliseconds(400));
  auto engine = StartEngine(/*max_waiting=*/16);
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::atomic<int64_t> steps{0};
  (*engine)->SetStepObserver([&](const EngineStepStats&) { steps.fetch_add(1); });

  // `keep` runs throughout, so the engine keeps stepping while the others are cancelled.
  auto keep = std::make_shared<Collected>();
  ASSERT_TRUE((*engine)->Submit(Request(8, 12, keep)).ok());
  ASSERT_TRUE(WaitStats(**engine, [](const EngineStats& s) { return s.pool.pages_reserved > 0; },
                        std::chrono::seconds(10)));
  const int64_t keep_reserved = (*engine)->stats().pool.pages_reserved;
  ASSERT_GT(keep_reserved, 0);
  auto running = std::make_shared<Collected>();
  absl::StatusOr<RequestHandle> running_h = (*engine)->Submit(Request(40, 20, running));
  ASSERT_TRUE(running_h.ok()) << running_h.status();
  ASSERT_TRUE(WaitStats(
      **engine, [&](const EngineStats& s) { return s.pool.pages_reserved > keep_reserved; }, std::chrono::seconds(10)));

  // Inside a 400 ms step: a Submit, stats and two Aborts (one admitted request, one that is
  // still in the inbox) each answer at once.
  ASSERT_TRUE(slow_.WaitInStep(std::chrono::seconds(10)));
  const int64_t steps_before = steps.load();
  auto queued = std::make_shared<Collected>();
  auto t0 = Clock::now();
  absl::StatusOr<RequestHandle> queued_h = (*engine)->Submit(Request(30, 5, queued));
  const double submit_ms = MsSince(t0);
  ASSERT_TRUE(queued_h.ok()) << queued_h.status();
  t0 = Clock::now();
  const EngineStats during = (*engine)->stats();
  const double stats_ms = MsSince(t0);
  EXPECT_EQ(during.running + during.waiting, 3) << "the request in the inbox counts";
  t0 = Clock::now();
  ASSERT_TRUE((*engine)->Abort(*running_h).ok());
  ASSERT_TRUE((*engine)->Abort(*queued_h).ok());
  const double abort_ms = MsSince(t0);
  const bool still_in_step = slow_.in_step() && steps.load() == steps_before;
  EXPECT_LT(submit_ms, 50) << "Submit waited for the step";
  EXPECT_LT(stats_ms, 50) << "stats() waited for the step";
  EXPECT_LT(abort_ms, 50) << "two Aborts waited for the step";
  EXPECT_TRUE(still_in_step) << "the calls were not made during a step; the timings prove nothing";

  // The pages of both are back once the step under way has ended, before another runs.
  ASSERT_TRUE(WaitStats(
      **engine, [&](const EngineStats& s) { return s.pool.pages_reserved == keep_reserved && s.waiting == 0; },
      std::chrono::seconds(10)));
  EXPECT_LE(steps.load() - steps_before, 1) << "the pages came back only after another step";
  EXPECT_TRUE(running->finished);
  EXPECT_EQ(running->status.code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(queued->finished);
  EXPECT_EQ(queued->status.code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(queued->tokens.empty());

  slow_.set_step(std::chrono::milliseconds(0));
  ASSERT_TRUE(WaitStats(**engine, [](const EngineStats& s) { return s.running == 0; }, std::chrono::seconds(30)));
  EXPECT_EQ(keep->tokens.size(), 12u) << "the request nobody cancelled is unaffected";
  EXPECT_EQ((*engine)->stats().pool.pages_used, 0);
  EXPECT_TRUE((*engine)->CheckInvariants().ok());
}

TEST_F(EngineInboxTest, BadAndUnqueueableRequestsAreRefusedAtOnceDuringAStep) {
  slow_.set_step(std::chrono::milliseconds(400));
  // One request waits at most; the pool fits about one 40-token request at a time.
  auto engine = StartEngine(/*max_waiting=*/1);
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::vector<std::shared_ptr<Collected>> got;
  for (int i = 0; i < 2; ++i) {
    got.push_back(std::make_shared<Collected>());
    ASSERT_TRUE((*engine)->Submit(Request(700, 20, got.back())).ok()) << i;
  }
  ASSERT_TRUE(WaitStats(
      **engine, [](const EngineStats& s) { return s.pool.pages_reserved > 0 && s.running == 1 && s.waiting == 1; },
      std::chrono::seconds(10)));
  ASSERT_TRUE(slow_.WaitInStep(std::chrono::seconds(10)));

  auto t0 = Clock::now();
  absl::StatusOr<RequestHandle> full = (*engine)->Submit(Request(700, 20, std::make_shared<Collected>()));
  const double full_ms = MsSince(t0);
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted) << full.status();
  EXPECT_TRUE(IsQueueFull(full.status())) << "a full queue is backpressure: the client may retry";
  t0 = Clock::now();
  absl::StatusOr<RequestHandle> bad = (*engine)->Submit(Request(0, 20, std::make_shared<Collected>()));
  const double bad_ms = MsSince(t0);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
  t0 = Clock::now();
  absl::StatusOr<RequestHandle> huge = (*engine)->Submit(Request(3000, 1000, std::make_shared<Collected>()));
  const double huge_ms = MsSince(t0);
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted) << huge.status();
  EXPECT_FALSE(IsQueueFull(huge.status())) << "it can never fit: no retry helps";
  EXPECT_TRUE(slow_.in_step()) << "the calls were not made during a step; the timings prove nothing";
  EXPECT_LT(full_ms, 50);
  EXPECT_LT(bad_ms, 50);
  EXPECT_LT(huge_ms, 50);
  EXPECT_EQ((*engine)->Abort(987654).code(), absl::StatusCode::kNotFound);

  slow_.set_step(std::chrono::milliseconds(0));
  ASSERT_TRUE(WaitStats(**engine, [](const EngineStats& s) { return s.running == 0 && s.waiting == 0; },
                        std::chrono::seconds(60)));
  for (const auto& c : got) EXPECT_EQ(c->tokens.size(), 20u);
  EXPECT_EQ((*engine)->stats().pool.pages_used, 0);
}

TEST_F(EngineInboxTest, StopGivesUpOnAStepThatDoesNotEnd) {
  slow_.set_step(std::chrono::milliseconds(60000));
  auto engine = StartEngine(/*max_waiting=*/4);
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto stuck = std::make_shared<Collected>();
  ASSERT_TRUE((*engine)->Submit(Request(8, 4, stuck)).ok());
  ASSERT_TRUE(slow_.WaitInStep(std::chrono::seconds(10)));
  const auto t0 = Clock::now();
  EXPECT_FALSE((*engine)->Stop(std::chrono::milliseconds(200))) << "Stop waited for a step that never ends";
  EXPECT_LT(MsSince(t0), 2000);
  // A Submit after Stop is refused (the loop will not drain it), and health still answers.
  EXPECT_EQ((*engine)->Submit(Request(8, 4, std::make_shared<Collected>())).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ((*engine)->stats().running, 1);
  slow_.Release();  // the step ends; the loop cancels what is left and ends
  EXPECT_TRUE((*engine)->Stop(std::chrono::seconds(10)));
  EXPECT_TRUE(stuck->finished);
  EXPECT_EQ(stuck->status.code(), absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace kvserve
