// A fixture for scheduler tests on random:tiny: prompts of made-up ids, the one-sequence
// Generate() reference, a scheduler over a fresh pool, and requests whose events are collected.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/generator.h"
#include "engine/kv/page_pool.h"
#include "engine/scheduler/scheduler.h"
#include "tests/engine/scheduler/scheduler_test_util.h"
#include "tests/engine/tiny_model.h"

namespace kvserve::testing {

class TinySchedulerTest : public ::testing::Test {
 protected:
  static constexpr int64_t kPageSize = 4, kChunk = 64;

  void SetUp() override { MakeTinyModel(5, &model_, &tokenizer_, &backend_); }

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

  // A scheduler over a fresh 4,000-page pool; config's prefill_chunk is set to kChunk.
  std::unique_ptr<Scheduler> NewScheduler(SchedulerConfig config) {
    pool_ = std::make_unique<PagePool>(
        PagePoolShape{4000, kPageSize, model_->config.n_kv_heads, model_->config.head_dim});
    config.prefill_chunk = kChunk;
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

  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<PagePool> pool_;
};

}  // namespace kvserve::testing
