// The continuous-batching scheduler with its KV pool in "device" memory, run on the CPU: the
// host-as-device backend (tests/kernels/host_as_device_backend.h) sends the scheduler down
// every branch it takes on CUDA (device compression, query rows and logits through CopyOut,
// refusal of host-only policies) while computing with the CPU kernels, so its tokens must be
// exactly the CPU backend's. tests/kernels/cuda/scheduler_check.cc runs the same on CudaBackend.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/kv/kv_memory.h"
#include "engine/model/model_loader.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/scheduler/engine.h"
#include "engine/scheduler/scheduler.h"
#include "gtest/gtest.h"
#include "tests/engine/scheduler/scheduler_test_util.h"
#include "tests/kernels/host_as_device_backend.h"

namespace kvserve {
namespace {

// What one request's sink received, with the final event's KV usage.
struct Spec {
  std::vector<int32_t> prompt;
  std::string policy;  // "" = the server default (full)
  std::string at;      // chunk|prefill_end
  int arrival_step = 0;
};

class SchedulerDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = MakeRandomModel("tiny", 5);
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::make_unique<Model>(*std::move(m));
    auto t = Tokenizer::Create(model_->tokenizer);
    ASSERT_TRUE(t.ok()) << t.status();
    tokenizer_ = std::make_unique<Tokenizer>(*std::move(t));
  }

  std::vector<int32_t> Prompt(int n, int salt) const {
    std::vector<int32_t> p;
    for (int i = 0; i < n; ++i) p.push_back(static_cast<int32_t>((i * 37 + salt * 101 + 11) % 500));
    return p;
  }

  EngineRequest Request(const Spec& s, std::shared_ptr<Collected> out) const {
    EngineRequest r;
    r.prompt = s.prompt;
    r.max_new_tokens = kNewTokens;
    r.ignore_eos = true;
    if (!s.policy.empty()) {
      r.kv.policy = s.policy;
      r.kv.budget = 40;
      r.kv.window = 8;
    }
    if (!s.at.empty()) r.kv.compress_at = *ParseCompressAt(s.at);
    r.sink = CollectInto(out);
    return r;
  }

  // Runs the specs through a Scheduler whose pool is allocated through `backend` (device
  // memory for the host-as-device backend), submitting each at its arrival step.
  std::vector<Collected> Run(Backend& backend, const std::vector<Spec>& specs, int64_t* max_running = nullptr) {
    const int64_t page = 8;
    PagePool pool({4096, page, model_->config.n_kv_heads, model_->config.head_dim}, &backend);
    EXPECT_EQ(pool.host_memory(), backend.HostMemory());
    SchedulerConfig config;
    config.prefill_chunk = 32;
    config.max_batch_tokens = 256;
    Scheduler sched(*model_, *tokenizer_, backend, pool, config);
    std::vector<std::shared_ptr<Collected>> got(specs.size());
    size_t submitted = 0;
    for (int step = 0; submitted < specs.size() || !sched.idle(); ++step) {
      for (size_t i = 0; i < specs.size(); ++i) {
        if (got[i] || specs[i].arrival_step > step) continue;
        got[i] = std::make_shared<Collected>();
        auto h = sched.Submit(Request(specs[i], got[i]));
        EXPECT_TRUE(h.ok()) << "request " << i << ": " << h.status();
        ++submitted;
      }
      EXPECT_TRUE(sched.StepAndDeliver().ok());
      EXPECT_TRUE(sched.CheckInvariants().ok());
      if (max_running) *max_running = std::max(*max_running, sched.num_running());
      if (step > 10000) {
        ADD_FAILURE() << "scheduler did not finish";
        break;
      }
    }
    EXPECT_EQ(pool.stats().pages_used, 0);
    std::vector<Collected> out;
    for (const auto& g : got) out.push_back(g ? *g : Collected{});
    return out;
  }

  static constexpr int32_t kNewTokens = 12;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(SchedulerDeviceTest, DevicePoolGivesTheCpuTokensForConcurrentMixedPolicies) {
  // Full cache and SnapKV/CriticalKV at both compression points, mixed in one batch, 36
  // requests arriving over the first steps (so prefill chunks and decode tokens share steps).
  const std::vector<std::pair<std::string, std::string>> kinds = {
      {"", ""}, {"snapkv", "chunk"}, {"snapkv", "prefill_end"}, {"criticalkv", "chunk"},
      {"criticalkv", "prefill_end"}, {"pyramid", "prefill_end"}};
  std::vector<Spec> specs;
  for (int i = 0; i < 36; ++i) {
    const auto& [policy, at] = kinds[static_cast<size_t>(i) % kinds.size()];
    specs.push_back({Prompt(60 + (i * 23) % 110, i), policy, at, i % 5});
  }
  auto cpu = MakeCpuBackend();
  HostAsDeviceBackend device;
  const std::vector<Collected> want = Run(*cpu, specs);
  int64_t max_running = 0;
  const std::vector<Collected> got = Run(device, specs, &max_running);
  EXPECT_GE(max_running, 32) << "the batch should reach 32 concurrent sequences";
  EXPECT_GT(device.compression_ops, 0) << "compression must take the device path";
  for (size_t i = 0; i < specs.size(); ++i) {
    const std::string what = "request " + std::to_string(i) + " (" +
                             (specs[i].policy.empty() ? "full" : specs[i].policy + " " + specs[i].at) + ")";
    ASSERT_TRUE(want[i].finished && want[i].status.ok()) << what << ": " << want[i].status;
    ASSERT_TRUE(got[i].finished) << what;
    ASSERT_TRUE(got[i].status.ok()) << what << ": " << got[i].status;
    EXPECT_EQ(got[i].tokens.size(), static_cast<size_t>(kNewTokens)) << what;
    EXPECT_EQ(got[i].tokens, want[i].tokens) << what;
    EXPECT_EQ(got[i].kv_tokens_kept, want[i].kv_tokens_kept) << what;
    EXPECT_EQ(got[i].kv_entries_evicted, want[i].kv_entries_evicted) << what;
    if (!specs[i].policy.empty()) {
      EXPECT_GT(got[i].kv_entries_evicted, 0) << what;
    }
  }
}

TEST_F(SchedulerDeviceTest, PoliciesWithoutADeviceFormAreRefusedAtSubmitAndOthersCarryOn) {
  HostAsDeviceBackend device;
  PagePool pool({2048, 8, model_->config.n_kv_heads, model_->config.head_dim}, &device);
  SchedulerConfig config;
  config.prefill_chunk = 32;
  Scheduler sched(*model_, *tokenizer_, device, pool, config);
  auto running = std::make_shared<Collected>();
  ASSERT_TRUE(sched.Submit(Request({Prompt(100, 1), "snapkv", "chunk"}, running)).ok());
  ASSERT_TRUE(sched.StepAndDeliver().ok());  // the first request is mid-prefill

  struct Refused {
    std::string policy;
    double auto_risk;
    std::string named;  // what the message must name
  };
  for (const Refused& r : std::vector<Refused>{{"keydiff", 0, "keydiff"},
                                               {"mergereduce:random", 0, "mergereduce:random"},
                                               {"mergereduce:cluster", 0, "mergereduce:cluster"},
                                               {"snapkv", 0.2, "auto:0.2"}}) {
    auto out = std::make_shared<Collected>();
    EngineRequest req = Request({Prompt(50, 2), r.policy, "prefill_end"}, out);
    if (r.auto_risk > 0) {
      req.kv.budget.reset();
      req.kv.auto_risk = r.auto_risk;
    }
    auto h = sched.Submit(std::move(req));
    ASSERT_FALSE(h.ok()) << r.named;
    EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument) << h.status();
    EXPECT_NE(h.status().message().find(r.named), std::string::npos) << h.status();
    EXPECT_NE(h.status().message().find("host-as-device"), std::string::npos) << h.status();
    EXPECT_FALSE(out->finished) << "a refused request's sink is never called";
  }
  EXPECT_EQ(sched.num_running() + sched.num_waiting(), 1);
  while (!sched.idle()) ASSERT_TRUE(sched.StepAndDeliver().ok());
  EXPECT_TRUE(running->finished);
  EXPECT_TRUE(running->status.ok()) << running->status;
  EXPECT_EQ(running->tokens.size(), static_cast<size_t>(kNewTokens));
  EXPECT_EQ(pool.stats().pages_used, 0);

  // The same request is fine with a host pool: the refusal is about the device.
  auto cpu = MakeCpuBackend();
  PagePool host({2048, 8, model_->config.n_kv_heads, model_->config.head_dim});
  Scheduler host_sched(*model_, *tokenizer_, *cpu, host, config);
  EXPECT_TRUE(host_sched.Submit(Request({Prompt(50, 2), "keydiff", "prefill_end"}, std::make_shared<Collected>())).ok());
}

TEST_F(SchedulerDeviceTest, EngineAllocatesItsPoolOnTheBackendAndRefusesHostOnlyDefaults) {
  HostAsDeviceBackend device;
  EngineConfig config;
  config.num_pages = 512;
  config.page_size = 8;
  config.scheduler.kv_defaults.policy = "keydiff";
  config.scheduler.kv_defaults.budget = 40;
  auto refused = Engine::Start(*model_, *tokenizer_, device, config);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("--kv-policy"), std::string::npos) << refused.status();
  EXPECT_NE(refused.status().message().find("keydiff"), std::string::npos) << refused.status();
  auto cpu = MakeCpuBackend();
  EXPECT_TRUE(Engine::Start(*model_, *tokenizer_, *cpu, config).ok()) << "keydiff runs on a host pool";

  // With a device-form default the engine runs; LlamaForward refuses a host pool on a
  // non-host backend, so finishing proves the pool was allocated through the backend.
  config.scheduler.kv_defaults.policy = "criticalkv";
  config.scheduler.kv_defaults.window = 8;
  auto engine = Engine::Start(*model_, *tokenizer_, device, config);
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto out = std::make_shared<Collected>();
  std::mutex mu;
  std::condition_variable cv;
  EngineRequest req = Request({Prompt(90, 3), "", ""}, out);
  RequestSink inner = std::move(req.sink);
  req.sink = [&, inner](const StreamEvent& e) {
    std::lock_guard<std::mutex> lock(mu);
    inner(e);
    cv.notify_all();
  };
  ASSERT_TRUE((*engine)->Submit(std::move(req)).ok());
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return out->finished; }));
  EXPECT_TRUE(out->status.ok()) << out->status;
  EXPECT_EQ(out->tokens.size(), static_cast<size_t>(kNewTokens));
  EXPECT_GT(out->kv_entries_evicted, 0) << "the default criticalkv compressed on the device path";
  EXPECT_GT(device.compression_ops, 0);
}

}  // namespace
}  // namespace kvserve
