// Question-aware chunk compression: a mid-prompt chunk is followed in the same step by a
// probe of the prompt's question, whose queries score the cache and whose entries are then
// dropped. What a user relies on: the plan of each step, the peak staying within budget +
// one chunk per layer, every path (generator, scheduler) agreeing, bad settings refused by
// name, and on a real model the needle kept where window scoring loses it.
#include <memory>

#include "engine/compress/keydiff_policy.h"
#include "engine/compress/sequence_compressor.h"
#include "engine/offline/cache_evaluator.h"
#include "engine/offline/retrieval_tasks.h"
#include "engine/model/model_loader.h"
#include "engine/scheduler/scheduler.h"
#include "gtest/gtest.h"
#include "tests/engine/compress/layer_fixture.h"
#include "tests/engine/compress/smollm2_passkey_fixture.h"
#include "tests/engine/compress/tiny_generation_fixture.h"
#include "tests/engine/scheduler/scheduler_test_util.h"
#include "tests/test_paths.h"

namespace kvserve {
namespace {

class QuestionProbeTest : public TinyGenerationTest {
 protected:
  static CompressionSettings Chunked(const char* policy, double budget, ChunkScoring scoring) {
    CompressionSettings kv;
    kv.policy = policy;
    kv.budget = budget;
    kv.window = 16;
    kv.at = CompressAt::kChunk;
    kv.chunk_headroom = 0;  // compress after every chunk
    kv.chunk_scoring = scoring;
    return kv;
  }
};

TEST_F(QuestionProbeTest, AStepIsTheChunkThenTheQuestionOnlyWhenCompressionIsDue) {
  const ModelConfig& c = model_->config;
  const std::vector<int32_t> prompt = Prompt(300);
  CompressionSettings kv = Chunked("snapkv", 30, ChunkScoring::kQuestion);
  auto comp = *SequenceCompressor::Create(*model_, kv, 300, 4, 16, 64);
  ASSERT_TRUE(comp->ProbesQuestion());
  EXPECT_EQ(comp->question_tokens(), 16);
  SequenceKv seq(c.n_layers);
  // Empty cache, quota 30: a 64-token chunk makes every layer due, so 48 prompt tokens and
  // the prompt's last 16 run in this step.
  auto step = comp->NextPrefill(prompt, 0, 64, seq);
  EXPECT_EQ(step.prompt_tokens, 48);
  std::vector<int32_t> want(prompt.begin(), prompt.begin() + 48);
  want.insert(want.end(), prompt.end() - 16, prompt.end());
  EXPECT_EQ(std::vector<int32_t>(step.tokens.begin(), step.tokens.end()), want);
  // The probe runs right after the chunk, at 48..63.
  EXPECT_EQ(step.probe_tokens, 16);
  EXPECT_EQ(step.probe_start_pos, 48);
  // The last chunk reaches the question itself: no probe.
  step = comp->NextPrefill(prompt, 250, 64, seq);
  EXPECT_EQ(step.prompt_tokens, 50);
  EXPECT_EQ(step.tokens.size(), 50u);
  // A quota the chunk does not reach: nothing to score, no probe.
  auto roomy = *SequenceCompressor::Create(*model_, Chunked("snapkv", 100, ChunkScoring::kQuestion), 300, 4, 16, 64);
  EXPECT_EQ(roomy->NextPrefill(prompt, 0, 64, seq).tokens.size(), 64u);
  // question_at_end: the same probe at the question's own positions, 284..299.
  auto at_end = *SequenceCompressor::Create(*model_, Chunked("snapkv", 30, ChunkScoring::kQuestionAtEnd), 300, 4,
                                            16, 64);
  step = at_end->NextPrefill(prompt, 0, 64, seq);
  EXPECT_EQ(std::vector<int32_t>(step.tokens.begin(), step.tokens.end()), want);
  EXPECT_EQ(step.probe_tokens, 16);
  EXPECT_EQ(step.probe_start_pos, 284);
  // Window scoring and query-agnostic policies never probe.
  for (auto kv2 : {Chunked("snapkv", 30, ChunkScoring::kWindow), Chunked("keydiff", 30, ChunkScoring::kQuestion),
                   Chunked("streaming", 30, ChunkScoring::kQuestion)}) {
    auto other = *SequenceCompressor::Create(*model_, kv2, 300, 4, 16, 64);
    EXPECT_FALSE(other->ProbesQuestion()) << kv2.policy;
    EXPECT_EQ(other->NextPrefill(prompt, 0, 64, seq).tokens.size(), 64u) << kv2.policy;
  }
  // A chunk no longer than the question still moves on by one prompt token per step.
  std::fill(seq.layer_len.begin(), seq.layer_len.end(), 30);  // at the quota: any chunk is due
  step = comp->NextPrefill(prompt, 30, 10, seq);
  EXPECT_EQ(step.prompt_tokens, 1);
  EXPECT_EQ(step.tokens.size(), 17u);
}

TEST_F(QuestionProbeTest, GenerationStaysWithinBudgetPlusAChunkAndKeepsWhatWindowScoringKeeps) {
  const std::vector<int32_t> prompt = Prompt(600);
  for (const char* policy : {"snapkv", "criticalkv", "pyramid"}) {
    CompressionSettings question = Chunked(policy, 0.1, ChunkScoring::kQuestion);
    CompressionSettings window = Chunked(policy, 0.1, ChunkScoring::kWindow);
    if (std::string(policy) == "pyramid") question.plan = window.plan = BudgetPlan::kPyramid;
    // Generate sizes its pool to exactly the compressor's peak, so a probe past the bound
    // would fail the step with RESOURCE_EXHAUSTED.
    const GenerationResult q = Run(prompt, question, 8, 64, 16), w = Run(prompt, window, 8, 64, 16);
    ASSERT_FALSE(q.tokens.empty()) << policy;
    // 60-token quota + a 64-token chunk (its probe included): 8 pages of 16 per layer.
    EXPECT_LE(q.peak_kv_pages, 8 * model_->config.n_layers) << policy;
    EXPECT_EQ(q.kv_slots_at_end, w.kv_slots_at_end) << policy;
    // Evictions count prompt entries only, never the probe's.
    EXPECT_EQ(q.compression.evicted_slots, w.compression.evicted_slots) << policy;
  }
}

TEST_F(QuestionProbeTest, HeadroomCompressesLessOftenAndStaysWithinBudgetPlusHeadroom) {
  const ModelConfig& c = model_->config;
  const std::vector<int32_t> prompt = Prompt(600);
  // Quota 60, chunks of 64, headroom 256: a layer enters a step with at most 60 + 256 - 64.
  CompressionSettings kv = Chunked("snapkv", 0.1, ChunkScoring::kQuestion);
  kv.chunk_headroom = 256;
  auto comp = *SequenceCompressor::Create(*model_, kv, 600, 8, 16, 64);
  SequenceKv seq(c.n_layers);
  std::fill(seq.layer_len.begin(), seq.layer_len.end(), 124);  // quota + one chunk: not due yet
  EXPECT_EQ(comp->NextPrefill(prompt, 124, 64, seq).probe_tokens, 0);
  std::fill(seq.layer_len.begin(), seq.layer_len.end(), 200);  // another chunk would pass 316
  const auto step = comp->NextPrefill(prompt, 200, 64, seq);
  EXPECT_EQ(step.prompt_tokens, 48);
  EXPECT_EQ(step.probe_tokens, 16);
  // (60 + 256) slots: 20 pages of 16 per layer at most.
  EXPECT_EQ(comp->PeakPages(), 20 * c.n_layers);

  const GenerationResult every_chunk = Run(prompt, Chunked("snapkv", 0.1, ChunkScoring::kQuestion), 8, 64, 16);
  const GenerationResult roomy = Run(prompt, kv, 8, 64, 16);
  ASSERT_FALSE(roomy.tokens.empty());
  // Generate sizes its pool to the compressor's peak: the steps stayed within it.
  EXPECT_LE(roomy.peak_kv_pages, 20 * c.n_layers);
  EXPECT_GT(roomy.peak_kv_pages, every_chunk.peak_kv_pages);
  EXPECT_LT(roomy.compression.compactions, every_chunk.compression.compactions);
  EXPECT_EQ(roomy.kv_slots_at_end, every_chunk.kv_slots_at_end);

  // A headroom past the prompt never compresses mid-prompt: the one selection at the end,
  // scored by the question's 16 queries, is prefill_end's with a 16-query window.
  kv.chunk_headroom = 1000;
  CompressionSettings at_end = kv;
  at_end.at = CompressAt::kPrefillEnd;
  at_end.chunk_headroom = 0;
  const GenerationResult once = Run(prompt, kv, 8, 64, 16), reference = Run(prompt, at_end, 8, 64, 16);
  EXPECT_EQ(once.tokens, reference.tokens);
  EXPECT_EQ(once.peak_kv_pages, reference.peak_kv_pages);
  EXPECT_EQ(once.compression.compactions, reference.compression.compactions);

  // Out of range, or with prefill_end: refused by name.
  KvSettings bad;
  bad.chunk_headroom = -1;
  absl::Status st = ValidateKvSettings(bad, KvSource::kProto, c.n_layers);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("kv.chunk_headroom must be in [0, 1073741824] tokens, got -1"), std::string_view::npos)
      << st;
  bad.chunk_headroom = 2048;
  bad.compress_at = CompressAt::kPrefillEnd;
  st = ValidateKvSettings(bad, KvSource::kFlags, c.n_layers);
  EXPECT_NE(st.message().find("--chunk-headroom 2048 needs --compress-at chunk"), std::string_view::npos) << st;
}

TEST_F(QuestionProbeTest, MidPromptCompressionsKeepHalfTheHeadroomAndThePromptsEndKeepsTheQuota) {
  // Quota 60, chunks of 64, headroom 256: a mid-prompt compression leaves 60 + (256 - 64) / 2
  // = 156 entries, so the chunks after it are encoded over more than the quota; the layer
  // never holds more than 60 + 256 after a step; the prompt's end leaves the quota.
  const ModelConfig& c = model_->config;
  const std::vector<int32_t> prompt = Prompt(600);
  CompressionSettings kv = Chunked("snapkv", 0.1, ChunkScoring::kQuestion);
  kv.chunk_headroom = 256;
  auto comp = *SequenceCompressor::Create(*model_, kv, 600, 8, 16, 64);
  PagePool pool({comp->PeakPages(), 16, c.n_kv_heads, c.head_dim});
  SequenceKv seq(c.n_layers);
  LlamaForward fwd(*model_, *backend_, pool);
  std::vector<float> logits;
  std::vector<int64_t> after_mid_compressions;
  for (int64_t pos = 0; pos < 600;) {
    const auto step = comp->NextPrefill(prompt, pos, 64, seq);
    ForwardRequest req{step.tokens, pos, &seq, false, comp->window(), step.probe_tokens, step.probe_start_pos};
    logits.clear();
    ASSERT_TRUE(fwd.Step({&req, 1}, &logits).ok());
    for (int64_t len : seq.layer_len) EXPECT_LE(len, 60 + 256) << "at " << pos;
    const int64_t before = seq.layer_len[0] - step.probe_tokens;
    pos += step.prompt_tokens;
    ASSERT_TRUE(comp->AfterStep(*backend_, pool, seq, pos == 600).ok());
    if (pos < 600 && seq.layer_len[0] < before) after_mid_compressions.push_back(seq.layer_len[0]);
  }
  // 600 tokens in steps of 64 (48 with a probe), compressed whenever another chunk could pass 316.
  ASSERT_GE(after_mid_compressions.size(), 3u);
  for (int64_t len : after_mid_compressions) EXPECT_EQ(len, 156);
  for (int64_t len : seq.layer_len) EXPECT_EQ(len, 60);
  // Headroom 0 (one chunk): compressed back to the quota after every chunk, as before.
  kv.chunk_headroom = 0;
  const GenerationResult every_chunk = Run(prompt, kv, 1, 64, 16);
  EXPECT_LE(every_chunk.peak_kv_pages, 8 * c.n_layers);  // 60 + 64 entries: 8 pages of 16
}

TEST_F(QuestionProbeTest, TheSchedulerAndTheGeneratorProbeAlike) {
  const ModelConfig& c = model_->config;
  const std::vector<int32_t> prompt = Prompt(500);
  const GenerationResult alone = Run(prompt, Chunked("criticalkv", 0.15, ChunkScoring::kQuestion), 6, 64, 16);
  PagePool pool({400, 16, c.n_kv_heads, c.head_dim});
  SchedulerConfig config;
  config.prefill_chunk = 64;
  Scheduler sched(*model_, *tokenizer_, *backend_, pool, config);
  EngineRequest r;
  r.prompt = prompt;
  r.max_new_tokens = 6;
  r.ignore_eos = true;
  r.kv.policy = "criticalkv";
  r.kv.budget = 0.15;
  r.kv.window = 16;
  r.kv.compress_at = CompressAt::kChunk;
  r.kv.chunk_headroom = 0;  // compress after every chunk
  auto out = std::make_shared<Collected>();
  r.sink = CollectInto(out);
  ASSERT_TRUE(sched.Submit(std::move(r)).ok());
  while (!sched.idle()) {
    ASSERT_TRUE(sched.StepAndDeliver().ok());
    ASSERT_TRUE(sched.CheckInvariants().ok());
  }
  ASSERT_TRUE(out->status.ok()) << out->status;
  EXPECT_EQ(out->tokens, alone.tokens);
  EXPECT_EQ(pool.stats().pages_used, 0);
}

TEST_F(QuestionProbeTest, BadQuestionSettingsAreRefusedByName) {
  const std::vector<int32_t> prompt = Prompt(50);
  GenerationOptions o;
  o.compression = Chunked("snapkv", 0.5, ChunkScoring::kQuestion);
  o.compression.question_tokens = 51;  // longer than the prompt
  auto g = Generate(*model_, *tokenizer_, *backend_, prompt, o);
  ASSERT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(g.status().message().find("question_tokens 51"), std::string_view::npos) << g.status();
  for (int64_t bad : {0, -3, 5000}) {
    o.compression.question_tokens = bad;
    const absl::Status st = ValidateCompressionSettings(o.compression, model_->config.n_layers);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(st.message().find("question_tokens"), std::string_view::npos) << st;
  }
  o.compression.question_tokens = 8;
  EXPECT_TRUE(ValidateCompressionSettings(o.compression, model_->config.n_layers).ok());
  o.compression.at = CompressAt::kPrefillEnd;  // meaningless there: the window is the question
  absl::Status st = ValidateCompressionSettings(o.compression, model_->config.n_layers);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("prefill_end"), std::string_view::npos) << st;
  o.compression.at = CompressAt::kChunk;
  o.compression.chunk_headroom = 0;  // compress after every chunk
  o.compression.chunk_scoring = ChunkScoring::kWindow;
  EXPECT_EQ(ValidateCompressionSettings(o.compression, model_->config.n_layers).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseChunkScoring("questions").status().code(), absl::StatusCode::kInvalidArgument);
  // An explicit question sets the window the policy scores with.
  o.compression.chunk_scoring = ChunkScoring::kQuestion;
  o.compression.question_tokens = 5;
  auto comp = *SequenceCompressor::Create(*model_, o.compression, 50, 4, 16, 16);
  EXPECT_EQ(comp->question_tokens(), 5);
  EXPECT_EQ(comp->window()->capacity(), 5);
}

TEST(KeyDiffPolicyTest, TheKeyThatPointsAwayFromTheRestScoresHighest) {
  const int64_t len = 40, kvh = 2, d = 8;
  LayerFixture f(len, kvh, d);
  f.FillRandom(3);
  // Head 1: every key near one direction but slot 17, which points the other way.
  std::vector<float> k(static_cast<size_t>(d));
  for (int64_t s = 0; s < len; ++s) {
    for (int64_t e = 0; e < d; ++e) k[e] = (e == 0 ? 1.0f : 0.05f * static_cast<float>((s * 7 + e) % 5));
    if (s == 17) k[0] = -1.0f;
    std::copy(k.begin(), k.end(), f.k.begin() + (s * kvh + 1) * d);
  }
  f.Store();
  SelectionRequest r;
  r.layer = f.layer();
  r.n_keep = 3;
  EXPECT_FALSE(KeyDiffPolicy().ScoresWithQueries());
  EXPECT_TRUE(KeyDiffPolicy().ReadsHostPages());
  std::vector<float> scores;
  auto backend = MakeCpuBackend();
  KeyDiffScores(r.layer, &scores);
  ASSERT_EQ(scores.size(), static_cast<size_t>(kvh * len));
  const float* head1 = scores.data() + len;
  EXPECT_EQ(std::max_element(head1, head1 + len) - head1, 17);
  // A cosine, negated: within [-1, 1].
  for (float s : scores) {
    EXPECT_GE(s, -1.0f - 1e-5f);
    EXPECT_LE(s, 1.0f + 1e-5f);
  }
  auto policy = MakeKvPolicy([] {
    CompressionSettings s;
    s.policy = "keydiff";
    return s;
  }());
  ASSERT_TRUE(policy.ok());
  EXPECT_FALSE((*policy)->ScoresWithQueries());
  const Selection sel = (*policy)->Select(r, *backend);
  const std::vector<int32_t> head1_kept(sel.slots.begin() + 3, sel.slots.end());
  EXPECT_NE(std::find(head1_kept.begin(), head1_kept.end(), 17), head1_kept.end());
}

// On SmolLM2, a passkey in 1,024 tokens of filler read in chunks of 256 with 10% kept: the
// chunks' own last queries are filler and score the needle out before the question comes;
// the question's probe keeps it, and the model reads the key back.
using QuestionProbeSmolLm2 = testing::SmolLm2PasskeyAt1K;

TEST_F(QuestionProbeSmolLm2, KeepsTheNeedleThatWindowScoringDrops) {
  CacheEvaluator& eval = *eval_;
  const EvalSample* sample = &*sample_;
  CompressionSettings kv;
  kv.policy = "snapkv";
  kv.budget = 0.1;
  kv.window = window_;
  kv.pool_kernel = 13;
  auto at_end = eval.Score(kv);
  ASSERT_TRUE(at_end.ok()) << at_end.status();
  ASSERT_EQ(at_end->value, 1.0) << "prefill_end said '" << eval.last_answer() << "'";
  kv.at = CompressAt::kChunk;
  kv.chunk_headroom = 0;  // compress after every chunk
  kv.chunk_scoring = ChunkScoring::kWindow;
  auto window = eval.Score(kv);
  ASSERT_TRUE(window.ok()) << window.status();
  const std::string window_said = eval.last_answer();
  kv.chunk_scoring = ChunkScoring::kQuestion;
  auto question = eval.Score(kv);
  ASSERT_TRUE(question.ok()) << question.status();
  EXPECT_EQ(question->value, 1.0) << "question scoring said '" << eval.last_answer() << "', key " << sample->answers.at(0);
  EXPECT_EQ(window->value, 0.0) << "window scoring said '" << window_said << "'";
  // The right answer is far less likely from the window-scored cache.
  EXPECT_GT(window->answer_nll_gap, question->answer_nll_gap + 2.0);
  // Both bounded: budget + one chunk per layer, far below the full cache.
  CompressionSettings full_cache;
  full_cache.window = window_;
  auto full = eval.Score(full_cache);
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_LT(question->peak_kv_bytes, full->peak_kv_bytes / 2);
}

}  // namespace
}  // namespace kvserve
