// Merge-reduce inside generation and the scheduler: a budget that never binds changes no
// logit, chunk mode holds the peak under the admission bound, decode keeps every layer within
// its steady bound, and the final event reports the compressibility estimate.
#include <algorithm>
#include <cmath>

#include "engine/compress/sequence_compressor.h"
#include "engine/generator.h"
#include "engine/model/forward.h"
#include "engine/model/model_loader.h"
#include "engine/model/random_model.h"
#include "engine/scheduler/scheduler.h"
#include "gtest/gtest.h"
#include "tests/engine/compress/tiny_generation_fixture.h"
#include "tests/engine/scheduler/scheduler_test_util.h"

namespace kvserve {
namespace {

class MergeReduceSequenceTest : public TinyGenerationTest {};

TEST_F(MergeReduceSequenceTest, ABudgetThatNeverBindsIsIdenticalToTheFullCache) {
  const auto prompt = Prompt(150);
  const GenerationResult full = Run(prompt, {}, 20, 32);
  for (const char* policy : {"mergereduce:random", "mergereduce:cluster"}) {
    CompressionSettings kv;
    kv.policy = policy;
    kv.budget = 100000;
    kv.at = CompressAt::kChunk;
    const GenerationResult got = Run(prompt, kv, 20, 32);
    EXPECT_EQ(got.tokens, full.tokens) << policy;
    ASSERT_EQ(got.step_logits.size(), full.step_logits.size());
    for (size_t i = 0; i < got.step_logits.size(); ++i) EXPECT_EQ(got.step_logits[i], full.step_logits[i]) << policy;
    EXPECT_EQ(got.compression.evicted_slots, 0);
  }
}

TEST_F(MergeReduceSequenceTest, ChunkModePeakStaysUnderTheBoundAndBelowSnapKv) {
  const auto prompt = Prompt(600);
  CompressionSettings kv;
  kv.budget = 0.1;
  kv.window = kv.recent_window = 16;  // the scoring window and merge-reduce's recent span
  kv.at = CompressAt::kChunk;
  kv.policy = "snapkv";
  const GenerationResult snap = Run(prompt, kv, 8, 64, 16);
  for (const char* policy : {"mergereduce:random", "mergereduce:cluster"}) {
    kv.policy = policy;
    // Generate sizes its pool to PeakPages, so running at all shows the bound holds.
    const GenerationResult got = Run(prompt, kv, 8, 64, 16);
    const GenerationResult again = Run(prompt, kv, 8, 64, 16);
    EXPECT_EQ(got.tokens, again.tokens) << policy << " is seeded";
    EXPECT_LE(got.peak_kv_pages, snap.peak_kv_pages) << policy;
    EXPECT_GT(got.compression.evicted_slots, 0) << policy;
    EXPECT_LE(got.kv_slots_at_end, static_cast<int64_t>(60 * model_->config.n_layers)) << policy;
  }
}

TEST_F(MergeReduceSequenceTest, DecodeKeepsEveryLayerWithinItsSteadyBound) {
  const ModelConfig& c = model_->config;
  const int64_t ps = 8, prompt_len = 60, max_new = 200;
  for (const char* policy : {"mergereduce:random", "mergereduce:cluster"}) {
    CompressionSettings kv;
    kv.policy = policy;
    kv.budget = 40;
    kv.recent_window = 8;
    DecodeCompressed(kv, prompt_len, max_new, ps, [&](const SequenceCompressor& comp, const SequenceKv& seq, int64_t pos) {
      for (int64_t l = 0; l < c.n_layers; ++l) {
        const int64_t steady = MergeReduceBuckets::SteadyBound(comp.merge_reduce()->shape(l), prompt_len + max_new);
        EXPECT_LE(seq.layer_len[l], steady) << policy << " layer " << l << " at " << pos;
        EXPECT_LE(steady, 40) << policy;
      }
    });
  }
}

TEST_F(MergeReduceSequenceTest, SchedulerTakesTheFieldsAndReportsCompressibility) {
  const ModelConfig& c = model_->config;
  PagePool pool({400, 16, c.n_kv_heads, c.head_dim});
  Scheduler sched(*model_, *tokenizer_, *backend_, pool, SchedulerConfig{});
  StreamEvent last;
  EngineRequest r;
  r.prompt = Prompt(300);
  r.max_new_tokens = 4;
  r.ignore_eos = true;
  r.kv.policy = "mergereduce:cluster";
  r.kv.budget = 0.2;
  r.kv.reduce_protected_dims = 4;
  r.kv.compress_at = CompressAt::kChunk;
  r.sink = [&](const StreamEvent& e) { if (e.finished) last = e; };
  EngineRequest bad = r;
  bad.kv.reduce_protected_dims = -1;
  EXPECT_EQ(sched.Submit(std::move(bad)).status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(sched.Submit(std::move(r)).ok());
  while (!sched.idle()) {
    ASSERT_TRUE(sched.StepAndDeliver().ok());
    ASSERT_TRUE(sched.CheckInvariants().ok());
  }
  ASSERT_TRUE(last.status.ok()) << last.status;
  EXPECT_GT(last.kv_entries_evicted, 0);
  ASSERT_EQ(static_cast<int64_t>(last.kv_compressibility.layers.size()), c.n_layers);
  EXPECT_GT(last.kv_compressibility.mean.trace, 0);
  EXPECT_GT(last.kv_compressibility.mean.effective_rank, 1);
}

}  // namespace
}  // namespace kvserve
