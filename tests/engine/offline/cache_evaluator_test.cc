// CacheEvaluator on the tiny random model: the full cache and a budget that never binds score
// KL 0 and the full cache's answer; a tight budget moves the distribution; scoring never
// leaks pages.
#include "engine/offline/cache_evaluator.h"

#include <cmath>

#include "gtest/gtest.h"
#include "tests/engine/tiny_model.h"

namespace kvserve {
namespace {

class CacheEvaluatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kvserve::testing::MakeTinyModel(11, &model_, &tokenizer_, &backend_);
    if (HasFatalFailure()) return;
    eval_ = std::make_unique<CacheEvaluator>(*model_, *tokenizer_, *backend_, Options());
  }

  static CacheEvaluatorOptions Options() {
    CacheEvaluatorOptions o;
    o.max_context = 300;
    o.max_extra = 24;
    o.window = 16;
    o.page_size = 8;
    o.prefill_chunk = 64;  // several prefill steps, as at long contexts
    o.answer_tokens = 6;
    return o;
  }

  EvalSample Sample(int64_t n, int64_t continuation) const {
    EvalSample s;
    for (int64_t i = 0; i < n + continuation; ++i) {
      (i < n ? s.context : s.continuation).push_back(static_cast<int32_t>((i * 31 + 7) % 250));
    }
    return s;
  }

  CompressionSettings Settings(const char* policy, double budget) const {
    CompressionSettings s;
    s.policy = policy;
    s.budget = budget;
    s.window = 16;
    return s;
  }

  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<CacheEvaluator> eval_;
};

TEST_F(CacheEvaluatorTest, KlIsZeroForTheFullCacheAndAnUnboundBudgetAndPositiveWhenTight) {
  ASSERT_TRUE(eval_->Prefill(Sample(250, 20)).ok());
  const int64_t held = eval_->pool().stats().pages_used;
  auto full = eval_->Score(Settings("full", 1.0));
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(full->value, 0.0);
  for (const char* policy : {"streaming", "snapkv", "criticalkv", "pyramid"}) {
    auto unbound = eval_->Score(Settings(policy, 1.0));
    ASSERT_TRUE(unbound.ok()) << unbound.status();
    EXPECT_EQ(unbound->value, 0.0) << policy;
    auto tight = eval_->Score(Settings(policy, 0.1));
    ASSERT_TRUE(tight.ok()) << tight.status();
    EXPECT_GT(tight->value, 1e-6) << policy;
    EXPECT_EQ(eval_->pool().stats().pages_used, held) << policy;
  }
}

TEST_F(CacheEvaluatorTest, ChunkModePrefillsAgainCompressingAsItGoes) {
  ASSERT_TRUE(eval_->Prefill(Sample(250, 20)).ok());
  const int64_t held = eval_->pool().stats().pages_used;
  for (const char* policy : {"snapkv", "criticalkv", "mergereduce:random", "mergereduce:cluster"}) {
    // A budget that never binds (merge-reduce sizes its buckets for prompt + new tokens, so
    // it binds at 1.0): the re-prefill is the same computation as the full one.
    CompressionSettings chunk = Settings(policy, 1000);
    chunk.at = CompressAt::kChunk;
    chunk.chunk_headroom = 0;  // compress after every chunk
    auto unbound = eval_->Score(chunk);
    ASSERT_TRUE(unbound.ok()) << unbound.status();
    EXPECT_EQ(unbound->value, 0.0) << policy;
    // A tight one: later chunks attend to what the earlier compressions left, so the
    // result is a different cache from compressing once at the end.
    chunk.budget = 0.2;
    CompressionSettings at_end = chunk;
    at_end.at = CompressAt::kPrefillEnd;
    auto chunked = eval_->Score(chunk), ended = eval_->Score(at_end);
    ASSERT_TRUE(chunked.ok()) << chunked.status();
    ASSERT_TRUE(ended.ok()) << ended.status();
    EXPECT_GT(chunked->value, 1e-6) << policy;
    EXPECT_NE(chunked->value, ended->value) << policy;
    EXPECT_EQ(eval_->pool().stats().pages_used, held) << policy;
  }
}

TEST_F(CacheEvaluatorTest, RetrievalScoresTheGreedyAnswer) {
  EvalSample s = Sample(200, 0);
  s.answers = {"no such text"};
  ASSERT_TRUE(eval_->Prefill(s).ok());
  auto miss = eval_->Score(Settings("full", 1.0));
  ASSERT_TRUE(miss.ok()) << miss.status();
  EXPECT_EQ(miss->value, 0.0);
  const std::string said = eval_->last_answer();
  ASSERT_FALSE(said.empty());
  // What the full cache says is right by construction; a budget that never binds agrees.
  s.answers = {said};
  ASSERT_TRUE(eval_->Prefill(s).ok());
  EXPECT_EQ(eval_->Score(Settings("full", 1.0))->value, 1.0);
  EXPECT_EQ(eval_->Score(Settings("snapkv", 1.0))->value, 1.0);
  EXPECT_EQ(eval_->last_answer(), said);
  // A tight budget runs the decode-time re-selection too, and still returns every page.
  const int64_t held = eval_->pool().stats().pages_used;
  EXPECT_TRUE(eval_->Score(Settings("criticalkv", 0.05)).ok());
  EXPECT_EQ(eval_->pool().stats().pages_used, held);
}

TEST_F(CacheEvaluatorTest, AnAnswerOfSeveralPartsIsRightOnlyWithEveryPart) {
  EvalSample s = Sample(200, 0);
  s.answers = {"no such text"};
  ASSERT_TRUE(eval_->Prefill(s).ok());
  ASSERT_TRUE(eval_->Score(Settings("full", 1.0)).ok());
  const std::string said = eval_->last_answer();
  ASSERT_GE(said.size(), 4u);
  s.answers = {said.substr(0, 2), said.substr(said.size() - 2)};
  ASSERT_TRUE(eval_->Prefill(s).ok());
  EXPECT_EQ(eval_->Score(Settings("full", 1.0))->value, 1.0);
  s.answers = {said.substr(0, 2), "no such text"};
  ASSERT_TRUE(eval_->Prefill(s).ok());
  EXPECT_EQ(eval_->Score(Settings("full", 1.0))->value, 0.0);
}

TEST(AnswerBudgetTest, SeveralPartsGetRoomToRestateEach) {
  EvalSample one;
  one.answers = {"12345"};
  one.answer_tokens.assign(30, 1);
  EXPECT_EQ(AnswerBudget(12, one), 12);  // a lone answer keeps the configured length
  EvalSample two = one;
  two.answers = {"1", "2"};
  EXPECT_EQ(AnswerBudget(12, two), 64);
  two.answer_tokens.assign(3, 1);
  EXPECT_EQ(AnswerBudget(12, two), 12);
}

TEST_F(CacheEvaluatorTest, AnswerNllGapIsZeroForTheFullCacheAndTheKvPeakFollowsTheMode) {
  EvalSample s = Sample(250, 0);
  s.answers = {"unused"};
  s.answer_tokens = {11, 12, 13, 14};
  ASSERT_TRUE(eval_->Prefill(s).ok());
  auto full = eval_->Score(Settings("full", 1.0));
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(full->answer_nll_gap, 0.0);
  auto unbound = eval_->Score(Settings("snapkv", 1.0));
  EXPECT_EQ(unbound->answer_nll_gap, 0.0);
  // Scoring the answer leaves the cache as it was: a second score is identical.
  CompressionSettings tight = Settings("snapkv", 0.1);
  auto a = eval_->Score(tight), b = eval_->Score(tight);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->answer_nll_gap, 0.0);
  EXPECT_EQ(a->answer_nll_gap, b->answer_nll_gap);
  EXPECT_EQ(a->value, b->value);
  // prefill_end holds the whole context at its peak; chunk mode about the budget and a chunk.
  tight.at = CompressAt::kChunk;
  tight.chunk_headroom = 0;  // compress after every chunk
  auto chunked = eval_->Score(tight);
  ASSERT_TRUE(chunked.ok()) << chunked.status();
  EXPECT_EQ(a->peak_kv_bytes, full->peak_kv_bytes);
  EXPECT_LT(chunked->peak_kv_bytes, full->peak_kv_bytes);
}

TEST_F(CacheEvaluatorTest, SaysWhetherTheLayersStillHoldTheNeedle) {
  // StreamingLLM keeps 4 sinks and the most recent entries, so where a needle sits decides
  // whether every layer-head holds it or none does, in both modes.
  EvalSample s = Sample(240, 0);
  const auto text_of = [&](int64_t from, int64_t n) {
    return tokenizer_->Decode(absl::MakeConstSpan(s.context).subspan(from, n), /*render_special=*/true);
  };
  s.answer_tokens = {11, 12};
  for (CompressAt at : {CompressAt::kPrefillEnd, CompressAt::kChunk}) {
    CompressionSettings tight = Settings("streaming", 0.25);
    tight.at = at;
    tight.chunk_headroom = 0;
    s.answers = {text_of(100, 3)};  // mid-prompt: evicted
    ASSERT_TRUE(eval_->Prefill(s).ok());
    auto mid = eval_->Score(tight);
    ASSERT_TRUE(mid.ok()) << mid.status();
    EXPECT_EQ(mid->answer_kept, 0.0);
    EXPECT_EQ(eval_->Score(Settings("full", 1.0))->answer_kept, 1.0);
    EXPECT_TRUE(std::isnan(mid->cue_kept));  // no cues: not known
    s.answers = {text_of(232, 4)};  // among the last tokens: kept everywhere
    s.cues = {text_of(100, 3)};     // its key mid-prompt: evicted, reported apart
    ASSERT_TRUE(eval_->Prefill(s).ok());
    auto end = eval_->Score(tight);
    EXPECT_EQ(end->answer_kept, 1.0);
    EXPECT_EQ(end->cue_kept, 0.0);
    EXPECT_EQ(eval_->Score(Settings("full", 1.0))->cue_kept, 1.0);
    EXPECT_TRUE(std::isnan(end->decoy_kept));  // no decoys: not known
    s.decoys = {text_of(50, 3), text_of(236, 3)};  // one evicted, one kept: half, on average
    ASSERT_TRUE(eval_->Prefill(s).ok());
    auto decoyed = eval_->Score(tight);
    ASSERT_TRUE(decoyed.ok()) << decoyed.status();
    EXPECT_EQ(decoyed->decoy_kept, 0.5);
    EXPECT_EQ(eval_->Score(Settings("full", 1.0))->decoy_kept, 1.0);
    s.cues.clear();
    s.decoys.clear();
  }
  // Nothing to locate: not known.
  s.answers = {"no such text"};
  ASSERT_TRUE(eval_->Prefill(s).ok());
  EXPECT_TRUE(std::isnan(eval_->Score(Settings("streaming", 0.25))->answer_kept));
}

TEST_F(CacheEvaluatorTest, WithoutTheFullReferenceChunkRowsScoreAlikeWithNoGap) {
  // Chunk-mode rows never read the full cache's prefill, so skipping it (--no-full-reference)
  // must leave their answers, answer NLLs, needle and peak exactly as they were; only the gap,
  // which needs the full cache's NLL, goes. Rows that compress a copy of the full cache, and
  // the full row itself, are refused rather than scored on nothing.
  EvalSample s = Sample(250, 0);
  s.answers = {tokenizer_->Decode(absl::MakeConstSpan(s.context).subspan(120, 3), /*render_special=*/true)};
  s.answer_tokens = {11, 12, 13, 14};
  CompressionSettings chunk = Settings("snapkv", 0.2);
  chunk.at = CompressAt::kChunk;
  ASSERT_TRUE(eval_->Prefill(s).ok());
  auto with_reference = eval_->Score(chunk);
  ASSERT_TRUE(with_reference.ok()) << with_reference.status();

  CacheEvaluatorOptions o = Options();
  o.full_reference = false;
  CacheEvaluator alone(*model_, *tokenizer_, *backend_, o);
  EXPECT_EQ(alone.Score(chunk).status().code(), absl::StatusCode::kFailedPrecondition);  // no sample yet
  ASSERT_TRUE(alone.Prefill(s).ok());
  EXPECT_EQ(alone.prefill_seconds(), 0.0);
  auto without = alone.Score(chunk);
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_EQ(without->value, with_reference->value);
  EXPECT_EQ(without->answer_nll, with_reference->answer_nll);
  EXPECT_FALSE(std::isnan(without->answer_nll));
  EXPECT_EQ(without->answer_kept, with_reference->answer_kept);
  EXPECT_EQ(without->peak_kv_bytes, with_reference->peak_kv_bytes);
  EXPECT_TRUE(std::isnan(without->answer_nll_gap));
  EXPECT_EQ(alone.Score(Settings("snapkv", 0.2)).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(alone.Score(Settings("full", 1.0)).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(alone.Prefill(Sample(100, 8)).ok());  // kl: needs the full cache's logits
  EXPECT_EQ(alone.Score(chunk).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(CacheEvaluatorTest, ScoringNeedsAPrefillAndTheRecordedWindow) {
  EXPECT_EQ(eval_->Score(Settings("full", 1.0)).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(eval_->Prefill(Sample(100, 8)).ok());
  CompressionSettings other = Settings("snapkv", 0.5);
  other.window = 32;
  EXPECT_EQ(eval_->Score(other).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(eval_->Prefill(Sample(301, 8)).ok());  // longer than the evaluator was sized for
}

}  // namespace
}  // namespace kvserve
