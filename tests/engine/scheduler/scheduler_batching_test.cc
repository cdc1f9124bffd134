// Batched equals sequential: many greedy requests through the continuous-batching
// scheduler, arriving at different steps, give the same tokens as Generate() one by one.
#include <cstdlib>
#include <filesystem>
#include <random>

#include "engine/kv/kv_memory.h"
#include "engine/model/model_loader.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/scheduler/scheduler.h"
#include "tests/engine/scheduler/scheduler_test_util.h"

namespace kvserve {
namespace {

struct Case {
  std::vector<int32_t> prompt;
  int32_t max_new_tokens;
  int arrival_step;
};

// The reference runs each case alone with prefill chunk reference_chunk (0: prefill_chunk).
void RunBatchedVsSequential(const Model& model, const std::vector<Case>& cases, int64_t page_size,
                            int64_t prefill_chunk, int64_t max_batch_tokens, bool ignore_eos, float near_tie,
                            Determinism determinism = Determinism::kFastest, int64_t reference_chunk = 0) {
  auto tokenizer = Tokenizer::Create(model.tokenizer);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  auto backend = MakeCpuBackend(determinism);
  std::vector<GenerationResult> refs;
  for (const Case& c : cases) {
    GenerationOptions o;
    o.max_new_tokens = c.max_new_tokens;
    o.ignore_eos = ignore_eos;
    o.page_size = page_size;
    o.prefill_chunk = reference_chunk > 0 ? reference_chunk : prefill_chunk;
    auto r = Generate(model, *tokenizer, *backend, c.prompt, o, {}, /*keep_logits=*/true);
    ASSERT_TRUE(r.ok()) << r.status();
    refs.push_back(*std::move(r));
  }
  int64_t pages = 0;
  for (const Case& c : cases) {
    pages += PeakPagesForRequest(static_cast<int64_t>(c.prompt.size()), c.max_new_tokens, page_size,
                                 model.config.n_layers);
  }
  PagePool pool({pages, page_size, model.config.n_kv_heads, model.config.head_dim});
  SchedulerConfig config;
  config.prefill_chunk = prefill_chunk;
  config.max_batch_tokens = max_batch_tokens;
  Scheduler sched(model, *tokenizer, *backend, pool, config);
  std::vector<std::shared_ptr<Collected>> got(cases.size());
  int step = 0;
  size_t submitted = 0;
  int64_t max_running = 0;
  while (submitted < cases.size() || !sched.idle()) {
    for (size_t i = 0; i < cases.size(); ++i) {
      if (got[i] || cases[i].arrival_step > step) continue;
      got[i] = std::make_shared<Collected>();
      EngineRequest req;
      req.prompt = cases[i].prompt;
      req.max_new_tokens = cases[i].max_new_tokens;
      req.ignore_eos = ignore_eos;
      req.sink = CollectInto(got[i]);
      ASSERT_TRUE(sched.Submit(std::move(req)).ok());
      ++submitted;
    }
    max_running = std::max(max_running, sched.num_running());
    ASSERT_TRUE(sched.StepAndDeliver().ok());
    ASSERT_TRUE(sched.CheckInvariants().ok()) << sched.CheckInvariants();
    ++step;
    ASSERT_LT(step, 10000);
  }
  EXPECT_GT(max_running, 2) << "the cases never ran batched";
  for (size_t i = 0; i < cases.size(); ++i) {
    ASSERT_TRUE(got[i]->finished);
    ASSERT_TRUE(got[i]->status.ok()) << got[i]->status;
    ExpectSameGreedy(refs[i], *got[i], near_tie, "request " + std::to_string(i));
  }
  EXPECT_EQ(pool.stats().pages_used, 0);
  EXPECT_EQ(pool.stats().pages_reserved, 0);
}

TEST(SchedulerBatchingTest, TinyRandomModelBatchedEqualsSequential) {
  auto model = MakeRandomModel("tiny", 11);
  ASSERT_TRUE(model.ok()) << model.status();
  std::mt19937 rng(7);
  // Page size 4, chunk 7: lengths straddle page and chunk boundaries.
  const std::vector<int> lengths = {1, 3, 4, 5, 6, 7, 8, 9, 13, 14, 15, 16, 17, 21, 28, 29, 40};
  std::vector<Case> cases;
  for (size_t i = 0; i < lengths.size(); ++i) {
    Case c;
    for (int t = 0; t < lengths[i]; ++t) c.prompt.push_back(static_cast<int32_t>(rng() % 500));
    c.max_new_tokens = 1 + static_cast<int32_t>(rng() % 12);
    c.arrival_step = static_cast<int>(rng() % 10);
    cases.push_back(c);
  }
  RunBatchedVsSequential(*model, cases, 4, 7, 24, /*ignore_eos=*/true, 1e-3f);
}

TEST(SchedulerBatchingTest, SmolLM2BatchedEqualsSequential) {
  const char* path = std::getenv("KVSERVE_SMOLLM2_GGUF");
  if (!path || !std::filesystem::exists(path)) GTEST_SKIP() << "SmolLM2 GGUF not present";
  auto model = LoadGgufModel(path);
  ASSERT_TRUE(model.ok()) << model.status();
  auto tokenizer = Tokenizer::Create(model->tokenizer);
  ASSERT_TRUE(tokenizer.ok());
  const std::vector<std::string> prompts = {
      "The capital of France is", "Once upon a time, in a land far away, there lived a",
      "1, 2, 3, 4, 5,", "Water boils at a temperature of",
      "A recipe for pancakes: first, take two eggs and a cup of flour, then", "def fibonacci(n):"};
  std::vector<Case> cases;
  int arrival = 0;
  for (const std::string& p : prompts) {
    cases.push_back({tokenizer->Encode(p, tokenizer->add_bos(), true), 8, arrival});
    arrival += 2;
  }
  // Page 16, chunk 8: the longer prompts take several chunks and cross a page boundary.
  RunBatchedVsSequential(*model, cases, 16, 8, 32, /*ignore_eos=*/false, 1.0f);
}

TEST(SchedulerBatchingTest, SmolLM2DeterministicBatchedEqualsSequentialExactly) {
  // --deterministic: no near-tie allowance at all, and the reference prefills in other chunks.
  const char* path = std::getenv("KVSERVE_SMOLLM2_GGUF");
  if (!path || !std::filesystem::exists(path)) GTEST_SKIP() << "SmolLM2 GGUF not present";
  auto model = LoadGgufModel(path);
  ASSERT_TRUE(model.ok()) << model.status();
  auto tokenizer = Tokenizer::Create(model->tokenizer);
  ASSERT_TRUE(tokenizer.ok());
  std::vector<Case> cases;
  int arrival = 0;
  for (const char* p : {"The capital of France is", "Once upon a time, in a land far away, there lived a",
                        "1, 2, 3, 4, 5,", "Water boils at a temperature of", "def fibonacci(n):",
                        "The three primary colors are", "My favourite book is", "In 1969, the first person to",
                        "The quick brown fox"}) {
    cases.push_back({tokenizer->Encode(p, tokenizer->add_bos(), true), 12, arrival});
    arrival += 1;
  }
  RunBatchedVsSequential(*model, cases, 16, 8, 64, /*ignore_eos=*/true, /*near_tie=*/0.0f,
                         Determinism::kBatchInvariant, /*reference_chunk=*/5);
}

}  // namespace
}  // namespace kvserve
