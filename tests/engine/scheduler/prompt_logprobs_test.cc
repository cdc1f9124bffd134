// Prompt scoring: each prompt token's logprob, computed from every row of the prefill chunks,
// equals the log-softmax of a reference that feeds the prompt one token per forward step;
// the request ends after the prompt with max_new_tokens 0, and the sampled output does not
// change when a request asks for the scores. With chunk-mode compression the first chunk's
// scores are the full cache's and a question probe's rows are never taken for prompt tokens;
// a device pool refuses scoring.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/kv/kv_memory.h"
#include "engine/model/forward.h"
#include "engine/scheduler/scheduler.h"
#include "tests/engine/scheduler/scheduler_test_util.h"
#include "tests/engine/tiny_model.h"
#include "tests/kernels/host_as_device_backend.h"

namespace kvserve {
namespace {

// Reference: the prompt run one token per step; row i gives token i+1's log-softmax (in
// double) and the ids by descending logit.
struct Reference {
  std::vector<double> logprob;           // [i] for prompt token i + 1
  std::vector<std::vector<int32_t>> by_logit;  // [i]: ids sorted best first
  std::vector<std::vector<double>> log_softmax;
};

Reference OneTokenAtATime(const Model& model, Backend& backend, const std::vector<int32_t>& prompt) {
  const ModelConfig& c = model.config;
  PagePool pool({PeakPagesForRequest(static_cast<int64_t>(prompt.size()), 0, 16, c.n_layers), 16, c.n_kv_heads,
                 c.head_dim});
  SequenceKv seq(c.n_layers);
  LlamaForward fwd(model, backend, pool);
  Reference ref;
  for (size_t i = 0; i + 1 < prompt.size(); ++i) {
    std::vector<float> logits;
    ForwardRequest r{absl::MakeConstSpan(&prompt[i], 1), static_cast<int64_t>(i), &seq};
    EXPECT_TRUE(fwd.Step({&r, 1}, &logits).ok());
    double mx = *std::max_element(logits.begin(), logits.end()), sum = 0;
    for (float x : logits) sum += std::exp(x - mx);
    std::vector<double> ls(logits.size());
    for (size_t v = 0; v < logits.size(); ++v) ls[v] = logits[v] - mx - std::log(sum);
    std::vector<int32_t> ids(logits.size());
    std::iota(ids.begin(), ids.end(), 0);
    std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
    ref.logprob.push_back(ls[prompt[i + 1]]);
    ref.by_logit.push_back(std::move(ids));
    ref.log_softmax.push_back(std::move(ls));
  }
  seq.Release(pool);
  return ref;
}

class PromptLogprobsTest : public ::testing::Test {
 protected:
  void SetUp() override { kvserve::testing::MakeTinyModel(5, &model_, &tokenizer_, &backend_); }

  std::vector<int32_t> Prompt(int n, int salt) const {
    std::vector<int32_t> p;
    for (int i = 0; i < n; ++i) p.push_back(3 + (i * 37 + salt * 11) % 400);
    return p;
  }
  // A greedy request of Prompt(prompt_len, salt) that ignores EOS, collected into `out`.
  EngineRequest Greedy(int prompt_len, int salt, int32_t max_new, std::shared_ptr<Collected> out) const {
    EngineRequest r;
    r.prompt = Prompt(prompt_len, salt);
    r.max_new_tokens = max_new;
    r.ignore_eos = true;
    r.sink = CollectInto(std::move(out));
    return r;
  }

  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Backend> backend_;
};

TEST_F(PromptLogprobsTest, EveryPromptTokenMatchesAOneTokenAtATimeReference) {
  const std::vector<int32_t> prompt = Prompt(45, 1);
  const Reference ref = OneTokenAtATime(*model_, *backend_, prompt);

  // Chunks of 16 (3 steps, the last one partial) sharing steps with another request's decode
  // tokens, so the scored rows sit after someone else's row in the step's logits.
  SchedulerConfig config;
  config.prefill_chunk = 16;
  PagePool pool({400, 16, model_->config.n_kv_heads, model_->config.head_dim});
  Scheduler sched(*model_, *tokenizer_, *backend_, pool, config);
  auto other = std::make_shared<Collected>();
  ASSERT_TRUE(sched.Submit(Greedy(5, 2, 10, other)).ok());
  ASSERT_TRUE(sched.StepAndDeliver().ok());

  constexpr int32_t kTop = 3;
  std::vector<TokenLogprob> got;
  int events_with_scores = 0;
  auto out = std::make_shared<Collected>();
  EngineRequest b;
  b.prompt = prompt;
  b.max_new_tokens = 4;
  b.ignore_eos = true;
  b.prompt_logprobs = kTop;
  b.sink = [&, collect = CollectInto(out)](const StreamEvent& e) {
    collect(e);
    if (!e.prompt_logprobs.empty()) {
      ++events_with_scores;
      EXPECT_EQ(e.token, out->tokens.empty() ? -1 : out->tokens.front()) << "the first event after the prompt";
      got = e.prompt_logprobs;
    }
  };
  ASSERT_TRUE(sched.Submit(std::move(b)).ok());
  while (!sched.idle()) ASSERT_TRUE(sched.StepAndDeliver().ok());

  ASSERT_TRUE(out->status.ok()) << out->status;
  EXPECT_EQ(events_with_scores, 1);
  ASSERT_EQ(got.size(), prompt.size() - 1) << "token 0 has no logprob";
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].token, prompt[i + 1]);
    EXPECT_NEAR(got[i].logprob, ref.logprob[i], 1e-4) << "prompt token " << i + 1;
    ASSERT_EQ(got[i].top.size(), static_cast<size_t>(kTop));
    for (int k = 0; k < kTop; ++k) {
      EXPECT_EQ(got[i].top[k].first, ref.by_logit[i][k]) << "prompt token " << i + 1 << ", alternative " << k;
      EXPECT_NEAR(got[i].top[k].second, ref.log_softmax[i][ref.by_logit[i][k]], 1e-4);
    }
  }
  EXPECT_EQ(out->tokens.size(), 4u);
  EXPECT_EQ(other->tokens.size(), 10u);
}

TEST_F(PromptLogprobsTest, ScoringLeavesTheSampledOutputAlone) {
  std::vector<std::vector<int32_t>> outputs;
  for (bool score : {false, true}) {
    PagePool pool({200, 16, model_->config.n_kv_heads, model_->config.head_dim});
    SchedulerConfig config;
    config.prefill_chunk = 8;
    Scheduler sched(*model_, *tokenizer_, *backend_, pool, config);
    auto out = std::make_shared<Collected>();
    EngineRequest r = Greedy(30, 3, 12, out);
    if (score) r.prompt_logprobs = 0;
    ASSERT_TRUE(sched.Submit(std::move(r)).ok());
    while (!sched.idle()) ASSERT_TRUE(sched.StepAndDeliver().ok());
    outputs.push_back(out->tokens);
  }
  EXPECT_EQ(outputs[0], outputs[1]);
}

TEST_F(PromptLogprobsTest, MaxNewTokensZeroEndsAfterThePromptWithItsScores) {
  PagePool pool({100, 16, model_->config.n_kv_heads, model_->config.head_dim});
  Scheduler sched(*model_, *tokenizer_, *backend_, pool, SchedulerConfig{});
  std::vector<StreamEvent> events;
  EngineRequest r;
  r.prompt = Prompt(20, 4);
  r.max_new_tokens = 0;
  r.prompt_logprobs = 0;
  r.sink = [&](const StreamEvent& e) { events.push_back(e); };
  ASSERT_TRUE(sched.Submit(std::move(r)).ok());
  while (!sched.idle()) ASSERT_TRUE(sched.StepAndDeliver().ok());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_TRUE(events[0].finished);
  EXPECT_TRUE(events[0].status.ok()) << events[0].status;
  EXPECT_EQ(events[0].finish_reason, FinishReason::kLength);
  EXPECT_EQ(events[0].prompt_logprobs.size(), 19u);
  EXPECT_TRUE(events[0].prompt_logprobs[0].top.empty()) << "0 alternatives asked for";
  EXPECT_EQ(pool.free_pages(), pool.shape().num_pages);
}

TEST_F(PromptLogprobsTest, BadValuesAreRefusedNamingTheField) {
  PagePool pool({100, 16, model_->config.n_kv_heads, model_->config.head_dim});
  Scheduler sched(*model_, *tokenizer_, *backend_, pool, SchedulerConfig{});
  EngineRequest zero;
  zero.prompt = Prompt(5, 5);
  zero.max_new_tokens = 0;
  absl::StatusOr<RequestHandle> h = sched.Submit(zero);
  EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(h.status().message().find("max_new_tokens must be >= 1 (0 only with prompt_logprobs), got 0"),
            std::string::npos)
      << h.status();
  EngineRequest negative = zero;
  negative.max_new_tokens = 1;
  negative.prompt_logprobs = -1;
  h = sched.Submit(negative);
  EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(h.status().message().find("prompt_logprobs must be in [0, "), std::string::npos) << h.status();
}

TEST_F(PromptLogprobsTest, ChunkCompressionScoresWhatThePrefillSaw) {
  const std::vector<int32_t> prompt = Prompt(60, 6);
  const Reference ref = OneTokenAtATime(*model_, *backend_, prompt);
  PagePool pool({400, 8, model_->config.n_kv_heads, model_->config.head_dim});
  SchedulerConfig config;
  config.prefill_chunk = 16;
  Scheduler sched(*model_, *tokenizer_, *backend_, pool, config);
  EngineRequest r;
  r.prompt = prompt;
  r.max_new_tokens = 2;
  r.prompt_logprobs = 0;
  r.kv.policy = "snapkv";
  r.kv.budget = 12;
  r.kv.window = 4;
  r.kv.compress_at = CompressAt::kChunk;  // the default chunk scoring probes with the question
  r.kv.chunk_headroom = 0;                // compress after every chunk
  const std::vector<TokenLogprob> got = ScorePrompt(sched, std::move(r));
  ASSERT_EQ(got.size(), prompt.size() - 1);
  double later_gap = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].token, prompt[i + 1]);
    EXPECT_LE(got[i].logprob, 0.0f);
    if (i + 1 < 16) {
      EXPECT_NEAR(got[i].logprob, ref.logprob[i], 1e-4) << "the first chunk saw the full cache; token " << i + 1;
    } else {
      later_gap = std::max(later_gap, std::fabs(got[i].logprob - ref.logprob[i]));
    }
  }
  EXPECT_GT(later_gap, 1e-3) << "later chunks saw a cache of 12 entries per layer, not the full one";
}

TEST_F(PromptLogprobsTest, ADevicePoolRefusesScoringNamingTheField) {
  HostAsDeviceBackend device;
  PagePool pool({100, 16, model_->config.n_kv_heads, model_->config.head_dim}, &device);
  ASSERT_FALSE(pool.host_memory());
  Scheduler sched(*model_, *tokenizer_, device, pool, SchedulerConfig{});
  EngineRequest r = Greedy(10, 7, 2, std::make_shared<Collected>());
  r.prompt_logprobs = 1;
  absl::StatusOr<RequestHandle> h = sched.Submit(std::move(r));
  EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(h.status().message().find("prompt_logprobs (gRPC logprobs.prompt_logprobs"), std::string::npos)
      << h.status();
}

}  // namespace
}  // namespace kvserve
