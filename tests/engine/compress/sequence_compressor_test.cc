// Compression inside generation: a budget that never binds changes nothing, decode-time
// re-selection keeps every layer within quota + one page, chunk mode bounds the peak, and
// the scheduler admits more compressed requests into the same pool.
#include "engine/compress/sequence_compressor.h"

#include <optional>

#include "engine/compress/basic_policies.h"
#include "engine/compress/compaction.h"
#include "engine/compress/criticalkv_policy.h"
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

class SequenceCompressorTest : public TinyGenerationTest {
 protected:
  // A phrase repeated to 600 tokens: its entries' keys come back near each other, so
  // merge-near's merges happen (a random model's keys for unrepeated tokens are nowhere near
  // half their length apart).
  static std::vector<int32_t> RepeatedPhrase() {
    std::vector<int32_t> prompt;
    for (int i = 0; i < 600; ++i) prompt.push_back(static_cast<int32_t>((i % 25) * 7 + 3));
    return prompt;
  }
  // The evicted-weight tests' settings: a 10% budget, window 16, headroom as given.
  static CompressionSettings TenPercent(const char* policy, CompressAt at, int64_t headroom) {
    CompressionSettings kv;
    kv.policy = policy;
    kv.budget = 0.1;
    kv.window = 16;
    kv.at = at;
    kv.chunk_headroom = headroom;
    return kv;
  }
  // 8 tokens after `prompt` in 64-token chunks and 16-slot pages; `weight` unset: the default.
  GenerationResult RunWeighted(const std::vector<int32_t>& prompt, CompressionSettings kv,
                               std::optional<EvictedWeight> weight) {
    kv.evicted_weight = weight;
    return Run(prompt, kv, 8, 64, 16);
  }
};

TEST_F(SequenceCompressorTest, ABudgetThatNeverBindsIsIdenticalToTheFullCache) {
  const auto prompt = Prompt(150);
  const GenerationResult full = Run(prompt, {}, 20);
  for (const char* policy : {"snapkv", "criticalkv", "streaming", "pyramid"}) {
    CompressionSettings kv;
    kv.policy = policy;
    kv.budget = 100000;
    const GenerationResult got = Run(prompt, kv, 20);
    EXPECT_EQ(got.tokens, full.tokens) << policy;
    ASSERT_EQ(got.step_logits.size(), full.step_logits.size());
    for (size_t i = 0; i < got.step_logits.size(); ++i) EXPECT_EQ(got.step_logits[i], full.step_logits[i]) << policy;
    EXPECT_EQ(got.compression.evicted_slots, 0);
  }
}

TEST_F(SequenceCompressorTest, CompactingWithTheFullPolicyChangesNoLogit) {
  // Keep-everything selections run through the real compaction path after every step.
  const auto prompt = Prompt(70);
  const ModelConfig& c = model_->config;
  auto run = [&](bool compact) {
    PagePool pool({64, 8, c.n_kv_heads, c.head_dim});
    SequenceKv seq(c.n_layers);
    LlamaForward fwd(*model_, *backend_, pool);
    std::vector<float> logits;
    std::vector<int32_t> tokens = prompt;
    std::vector<std::vector<float>> all;
    int64_t pos = 0;
    for (int step = 0; step < 12; ++step) {
      logits.clear();
      const auto span = absl::MakeConstSpan(tokens).subspan(pos);
      ForwardRequest req{span, pos, &seq, false};
      EXPECT_TRUE(fwd.Step({&req, 1}, &logits).ok());
      pos += static_cast<int64_t>(span.size());
      all.push_back(logits);
      tokens.push_back(static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
      if (!compact) continue;
      for (int64_t l = 0; l < c.n_layers; ++l) {
        SelectionRequest r;
        r.layer = LayerKv{pool.view(), seq.layer_pages[l], seq.layer_len[l]};
        r.n_keep = seq.layer_len[l];
        EXPECT_TRUE(CompactLayer(*backend_, pool, seq, l, FullPolicy().Select(r, *backend_)).ok());
      }
    }
    seq.Release(pool);
    return all;
  };
  EXPECT_EQ(run(true), run(false));
}

TEST_F(SequenceCompressorTest, DecodeReselectionKeepsEveryLayerWithinQuotaPlusOnePage) {
  const ModelConfig& c = model_->config;
  const int64_t ps = 8, prompt_len = 60, max_new = 100;
  for (const char* policy : {"snapkv", "criticalkv", "streaming", "pyramid"}) {
    CompressionSettings kv;
    kv.policy = policy;
    kv.budget = 24;
    kv.window = 8;
    const auto comp = DecodeCompressed(kv, prompt_len, max_new, ps,
                                       [&](const SequenceCompressor& running, const SequenceKv& seq, int64_t pos) {
      for (int64_t l = 0; l < c.n_layers; ++l) {
        EXPECT_LT(seq.layer_len[l], running.quotas()[l] + ps) << policy << " layer " << l << " at position " << pos;
      }
    });
    ASSERT_TRUE(comp);
    EXPECT_GT(comp->stats().evicted_slots, (prompt_len + max_new - 24) * c.n_layers - ps * c.n_layers) << policy;
  }
}

TEST_F(SequenceCompressorTest, CriticalKvWithCachedValueNormsSelectsAsIfRecomputed) {
  // The compressor projects each entry's value once and carries the norm through
  // compactions; a plain loop that recomputes them at every selection must agree exactly.
  const ModelConfig& c = model_->config;
  const int64_t ps = 8, prompt_len = 90, steps = 60, window = 8, chunk = 16;
  CompressionSettings kv;
  kv.policy = "criticalkv";
  kv.budget = 24;
  kv.window = window;
  kv.at = CompressAt::kChunk;
  kv.chunk_headroom = 0;  // compress after every chunk
  kv.evicted_weight = EvictedWeight::kDrop;  // as the plain loop's CompactLayer does
  auto run = [&](bool cached) {
    auto comp = *SequenceCompressor::Create(*model_, kv, prompt_len, steps, ps, chunk);
    PagePool pool({comp->PeakPages(), ps, c.n_kv_heads, c.head_dim});
    SequenceKv seq(c.n_layers);
    LlamaForward fwd(*model_, *backend_, pool);
    CriticalKvPolicy plain(kv.pool_kernel, kv.first_stage_ratio);
    std::vector<int32_t> tokens = Prompt(static_cast<int>(prompt_len));
    std::vector<float> logits, rows;
    std::vector<std::vector<float>> all;
    int64_t pos = 0;
    while (pos < prompt_len + steps) {
      logits.clear();
      const int64_t n = pos < prompt_len ? std::min(chunk, prompt_len - pos) : 1;
      ForwardRequest req{absl::MakeConstSpan(tokens).subspan(pos, n), pos, &seq, false, comp->window()};
      EXPECT_TRUE(fwd.Step({&req, 1}, &logits).ok());
      pos += n;
      const bool prompt_done = pos >= prompt_len;
      if (cached) {
        EXPECT_TRUE(comp->AfterStep(*backend_, pool, seq, prompt_done).ok());
      } else {
        for (int64_t l = 0; l < c.n_layers; ++l) {
          const int64_t q = comp->quotas()[l], len = seq.layer_len[l];
          if (!(prompt_done && pos > prompt_len ? len >= q + ps : len > q)) continue;
          comp->window()->CopyOrdered(l, &rows);
          SelectionRequest r;
          r.layer = LayerKv{pool.view(), seq.layer_pages[l], len};
          r.window = rows;
          r.window_len = comp->window()->size(l);
          r.n_heads = c.n_heads;
          r.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
          r.wo = model_->weights.layers[l].wo;
          r.n_keep = q;
          r.mid_prompt = !prompt_done;  // chunk mode before the prompt's end: attention alone
          EXPECT_TRUE(CompactLayer(*backend_, pool, seq, l, plain.Select(r, *backend_)).ok());
        }
      }
      if (pos >= prompt_len) {
        all.push_back(logits);
        tokens.push_back(static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
      }
    }
    return all;
  };
  EXPECT_EQ(run(true), run(false));
}

TEST_F(SequenceCompressorTest, ChunkModeBoundsThePeakBelowPrefillEnd) {
  const auto prompt = Prompt(600);
  CompressionSettings kv;
  kv.policy = "snapkv";
  kv.budget = 0.1;
  kv.window = 16;
  const GenerationResult at_end = Run(prompt, kv, 8, 64, 16);
  kv.at = CompressAt::kChunk;
  kv.chunk_headroom = 0;  // compress after every chunk
  const GenerationResult chunked = Run(prompt, kv, 8, 64, 16);
  const GenerationResult full = Run(prompt, {}, 8, 64, 16);
  // Full: 38 pages per layer; prefill_end peaks the same; chunk: (60 + 64) slots -> 8 pages.
  EXPECT_EQ(full.peak_kv_pages, 38 * model_->config.n_layers);
  EXPECT_EQ(at_end.peak_kv_pages, full.peak_kv_pages);
  EXPECT_LE(chunked.peak_kv_pages, 8 * model_->config.n_layers);
  EXPECT_EQ(chunked.kv_slots_at_end, at_end.kv_slots_at_end);
  EXPECT_GT(chunked.compression.compactions, at_end.compression.compactions);
}

TEST_F(SequenceCompressorTest, ChunkModeMergesMidPromptByDefaultAndPrefillEndDrops) {
  // What a request that names no evicted weight gets: chunk mode with SnapKV or CriticalKV
  // generates exactly as merge-mid (and not as drop or merge-near, whose logits differ),
  // prefill_end as drop. A 64-entry headroom cuts the prompt mid-way, so merge-mid merges.
  const std::vector<int32_t> prompt = RepeatedPhrase();
  for (const char* policy : {"snapkv", "criticalkv"}) {
    for (CompressAt at : {CompressAt::kChunk, CompressAt::kPrefillEnd}) {
      const CompressionSettings kv = TenPercent(policy, at, 64);
      const GenerationResult by_default = RunWeighted(prompt, kv, std::nullopt);
      const GenerationResult mid = RunWeighted(prompt, kv, EvictedWeight::kMergeMid);
      const GenerationResult near = RunWeighted(prompt, kv, EvictedWeight::kMergeNear);
      const GenerationResult drop = RunWeighted(prompt, kv, EvictedWeight::kDrop);
      const GenerationResult& same = at == CompressAt::kChunk ? mid : drop;
      const std::string what = std::string(policy) + " " + std::string(CompressAtName(at));
      EXPECT_EQ(by_default.tokens, same.tokens) << what;
      EXPECT_EQ(by_default.step_logits, same.step_logits) << what;
      EXPECT_NE(by_default.step_logits, near.step_logits) << what << ": merged at the prompt's end";
      if (at == CompressAt::kChunk) {
        EXPECT_NE(by_default.step_logits, drop.step_logits) << what << ": merged nothing mid-prompt";
      }
      EXPECT_NE(RunWeighted(prompt, kv, EvictedWeight::kMergeValues).step_logits, near.step_logits)
          << what << ": merge-values merged no value";
    }
  }
}

TEST_F(SequenceCompressorTest, MergeMidMergesAtMidPromptCutsAndDropsAtThePromptsEnd) {
  // merge-mid: merge-near where chunk mode cuts before the prompt's end, drop at its end.
  // With the default headroom a 600-token prompt is cut once, at its end: merge-mid is drop
  // there, logit for logit. With a 64-entry headroom it is cut mid-prompt too, and then
  // merge-mid is neither drop (it merged mid-prompt) nor merge-near (it dropped at the end).
  const std::vector<int32_t> prompt = RepeatedPhrase();
  for (const char* policy : {"snapkv", "criticalkv"}) {
    for (int64_t headroom : {int64_t{2048}, int64_t{64}}) {
      const CompressionSettings kv = TenPercent(policy, CompressAt::kChunk, headroom);
      const GenerationResult mid = RunWeighted(prompt, kv, EvictedWeight::kMergeMid);
      const GenerationResult drop = RunWeighted(prompt, kv, EvictedWeight::kDrop);
      const std::string what = std::string(policy) + " headroom " + std::to_string(headroom);
      EXPECT_EQ(mid.kv_slots_at_end, drop.kv_slots_at_end) << what;
      if (headroom > static_cast<int64_t>(prompt.size())) {
        EXPECT_EQ(mid.tokens, drop.tokens) << what;
        EXPECT_EQ(mid.step_logits, drop.step_logits) << what << ": merged at the prompt's end";
      } else {
        const GenerationResult near = RunWeighted(prompt, kv, EvictedWeight::kMergeNear);
        EXPECT_GT(mid.compression.compactions, 2 * model_->config.n_layers) << what << ": no mid-prompt cut";
        EXPECT_NE(mid.step_logits, drop.step_logits) << what << ": merged nothing mid-prompt";
        EXPECT_NE(mid.step_logits, near.step_logits) << what << ": merged at the prompt's end";
      }
    }
  }
}

TEST_F(SequenceCompressorTest, BadSettingsAreRejectedWithTheValue) {
  const auto prompt = Prompt(10);
  GenerationOptions o;
  o.compression.policy = "h2o";
  absl::Status st = ValidateGeneration(*model_, prompt, o, 4096);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("h2o"), std::string_view::npos) << st;
  o.compression.policy = "snapkv";
  o.compression.budget = 2.5;
  st = ValidateGeneration(*model_, prompt, o, 4096);
  EXPECT_NE(st.message().find("2.5"), std::string_view::npos) << st;
  o.compression.budget = -1;
  EXPECT_EQ(ValidateGeneration(*model_, prompt, o, 4096).code(), absl::StatusCode::kInvalidArgument);
  o.compression.budget = 0.5;
  o.compression.pool_kernel = 4;
  EXPECT_EQ(ValidateGeneration(*model_, prompt, o, 4096).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(SequenceCompressorTest, SchedulerAdmitsMoreCompressedRequestsAndReportsUsage) {
  const ModelConfig& c = model_->config;
  const int64_t ps = 16;
  // A full 400 + 8 token request needs 26 pages per layer = 52: the pool holds one.
  PagePool pool({60, ps, c.n_kv_heads, c.head_dim});
  SchedulerConfig config;
  config.prefill_chunk = 64;
  Scheduler sched(*model_, *tokenizer_, *backend_, pool, config);
  std::vector<std::shared_ptr<Collected>> out;
  for (int i = 0; i < 3; ++i) {
    EngineRequest r;
    r.prompt = Prompt(400);
    r.max_new_tokens = 8;
    r.ignore_eos = true;
    r.kv.policy = "snapkv";
    r.kv.budget = 0.1;
    r.kv.window = 16;
    r.kv.compress_at = CompressAt::kChunk;
    r.kv.chunk_headroom = 0;  // compress after every chunk
    out.push_back(std::make_shared<Collected>());
    r.sink = CollectInto(out.back());
    ASSERT_TRUE(sched.Submit(std::move(r)).ok());
  }
  EXPECT_EQ(sched.num_running(), 3) << "compressed peaks fit three at once";
  while (!sched.idle()) {
    ASSERT_TRUE(sched.StepAndDeliver().ok());
    ASSERT_TRUE(sched.CheckInvariants().ok());
    EXPECT_LE(pool.stats().pages_used, 60);
  }
  for (const auto& o : out) {
    EXPECT_TRUE(o->status.ok()) << o->status;
    EXPECT_EQ(o->tokens.size(), 8u);
  }
  EXPECT_EQ(pool.stats().pages_used, 0);
  EXPECT_EQ(pool.stats().pages_reserved, 0);

  // A full-cache request does not fit next to another.
  EngineRequest full;
  full.prompt = Prompt(400);
  full.max_new_tokens = 8;
  auto sink = std::make_shared<Collected>();
  full.sink = CollectInto(sink);
  EngineRequest full2 = full;
  ASSERT_TRUE(sched.Submit(std::move(full)).ok());
  ASSERT_TRUE(sched.Submit(std::move(full2)).ok());
  EXPECT_EQ(sched.num_running(), 1);
  EXPECT_EQ(sched.num_waiting(), 1);
}

TEST_F(SequenceCompressorTest, FinalEventCarriesKvUsage) {
  const ModelConfig& c = model_->config;
  PagePool pool({200, 16, c.n_kv_heads, c.head_dim});
  Scheduler sched(*model_, *tokenizer_, *backend_, pool, SchedulerConfig{});
  StreamEvent last;
  EngineRequest r;
  r.prompt = Prompt(300);
  r.max_new_tokens = 4;
  r.ignore_eos = true;
  r.kv.policy = "criticalkv";
  r.kv.budget = 50;
  r.sink = [&](const StreamEvent& e) { if (e.finished) last = e; };
  ASSERT_TRUE(sched.Submit(std::move(r)).ok());
  while (!sched.idle()) ASSERT_TRUE(sched.StepAndDeliver().ok());
  ASSERT_TRUE(last.status.ok());
  EXPECT_EQ(last.kv_entries_evicted, (300 - 50) * c.n_layers);
  EXPECT_EQ(last.kv_tokens_kept, (50 + 3) * c.n_layers);
  EXPECT_EQ(last.peak_kv_bytes, 19 * c.n_layers * PagePool::PageBytes(pool.shape()));
}

}  // namespace
}  // namespace kvserve
