// --sink-tokens with the scoring policies: the prompt's first N entries are kept by every
// selection whatever their scores (at most a quarter of what a layer-head keeps), so a long
// prompt's opening instruction survives chunk mode. What a user relies on: the per-policy
// defaults (4 for streaming and merge-reduce, none for the scoring policies, whose figures
// were measured without), the forced entries kept by every scoring policy and their count
// capped, the rest still the best-scored, and across a chunked prompt every layer-head still
// holding the first N positions at its end, within the same peak.
#include <algorithm>
#include <cmath>
#include <optional>
#include <random>

#include "engine/compress/compression_settings.h"
#include "engine/compress/kv_settings.h"
#include "engine/compress/sequence_compressor.h"
#include "engine/model/forward.h"
#include "gtest/gtest.h"
#include "tests/engine/compress/layer_fixture.h"
#include "tests/engine/compress/tiny_generation_fixture.h"

namespace kvserve {
namespace {

TEST(SinkTokensTest, StreamingAndMergeReduceKeepFourByDefaultTheScoringPoliciesNone) {
  CompressionSettings s;
  for (const char* policy : {"streaming", "mergereduce:random", "mergereduce:cluster"}) {
    s.policy = policy;
    EXPECT_EQ(SinkTokens(s), 4) << policy;
  }
  for (const char* policy : {"snapkv", "criticalkv", "pyramid", "keydiff", "full"}) {
    s.policy = policy;
    EXPECT_EQ(SinkTokens(s), 0) << policy;
  }
  // Set by a flag (serve, eval): every policy keeps that many, streaming's 4 included.
  KvSettings flags;
  flags.sink_tokens = 40;
  for (const char* policy : {"snapkv", "streaming"}) {
    s.policy = policy;
    EXPECT_EQ(SinkTokens(ResolveKvSettings(flags, s)), 40) << policy;
  }
  flags.sink_tokens = 0;
  s.policy = "streaming";
  EXPECT_EQ(SinkTokens(ResolveKvSettings(flags, s)), 0);
  flags.sink_tokens = -1;
  const absl::Status bad = ValidateKvSettings(flags, KvSource::kFlags, 30);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("--sink-tokens must be in [0, 1073741824], got -1"), std::string_view::npos) << bad;
}

// Keys whose first `cold` slots point away from every window query: scored lowest by SnapKV.
void MakeColdStart(LayerFixture& f, int64_t kvh, int64_t d, int64_t cold, std::vector<float>* window,
                   int64_t window_len, int64_t group) {
  f.FillRandom(11);
  std::mt19937 rng(3);
  std::normal_distribution<float> n(0.0f, 1.0f);
  window->assign(static_cast<size_t>(window_len * kvh * group * d), 0.0f);
  for (float& x : *window) x = 1.0f + 0.1f * n(rng);  // every query near (1, ..., 1)
  for (int64_t s = 0; s < cold; ++s) {
    for (int64_t i = 0; i < kvh * d; ++i) f.k[s * kvh * d + i] = -3.0f;
  }
  f.Store();
}

TEST(SinkTokensTest, EveryScoringPolicyKeepsTheFirstEntriesAndTheBestScoredRest) {
  const int64_t len = 80, kvh = 2, group = 2, d = 8, hidden = 16, window_len = 6, n_keep = 24, cold = 10;
  std::vector<float> window, wo(static_cast<size_t>(hidden * kvh * group * d), 0.5f);
  LayerFixture f(len, kvh, d);
  MakeColdStart(f, kvh, d, cold, &window, window_len, group);
  auto cpu = MakeCpuBackend();
  for (const char* policy : {"snapkv", "criticalkv", "pyramid", "keydiff"}) {
    CompressionSettings s;
    s.policy = policy;
    const std::unique_ptr<KvPolicy> p = *MakeKvPolicy(s);
    SelectionRequest r = f.Request(window, window_len, kvh * group, wo, n_keep);
    const Selection scored = p->Select(r, *cpu);
    r.keep_first = 4;
    const Selection sunk = p->Select(r, *cpu);
    r.keep_first = 1000;  // capped at n_keep / 4 = 6
    const Selection capped = p->Select(r, *cpu);
    for (int64_t h = 0; h < kvh; ++h) {
      auto kept = [&](const Selection& sel) {
        return std::vector<int32_t>(sel.slots.begin() + h * n_keep, sel.slots.begin() + (h + 1) * n_keep);
      };
      const std::vector<int32_t> a = kept(scored), b = kept(sunk), c = kept(capped);
      if (std::string(policy) != "keydiff") {
        // By score alone no cold slot survives (KeyDiff's anti-aligned keys are its most distinct).
        EXPECT_GE(a.front(), cold) << policy << " head " << h;
      }
      ASSERT_EQ(b.size(), static_cast<size_t>(n_keep));
      for (int32_t s = 0; s < 4; ++s) EXPECT_EQ(b[s], s) << policy << " head " << h;
      for (int32_t s = 0; s < 6; ++s) EXPECT_EQ(c[s], s) << policy << " head " << h;
      // The rest are the best-scored of the others: the score-only selection without its
      // lowest-ranked entries (those the forced ones displaced), in order.
      std::vector<int32_t> rest(b.begin() + 4, b.end());
      for (int32_t s : rest) EXPECT_GE(s, 4) << policy;
      if (std::string(policy) != "keydiff") {
        EXPECT_TRUE(std::includes(a.begin(), a.end(), rest.begin(), rest.end())) << policy << " head " << h;
      }
      EXPECT_LT(c[6], len) << policy;
    }
  }
}

class SinkTokensSequenceTest : public TinyGenerationTest {};

TEST_F(SinkTokensSequenceTest, AChunkedPromptEndsHoldingItsFirstPositionsInEveryLayerHead) {
  const ModelConfig& c = model_->config;
  const std::vector<int32_t> prompt = Prompt(600);
  auto share_holding_first = [&](std::optional<int64_t> sinks, int64_t* peak_pages) {
    CompressionSettings kv;
    kv.policy = "snapkv";
    kv.budget = 0.1;  // quota 60: at most 15 forced
    kv.window = 16;
    kv.at = CompressAt::kChunk;
    kv.chunk_headroom = 0;  // compress after every chunk
    kv.n_sink = sinks;
    auto comp = *SequenceCompressor::Create(*model_, kv, 600, 8, 16, 64);
    comp->TrackKeptPositions();
    PagePool pool({comp->PeakPages(), 16, c.n_kv_heads, c.head_dim});
    SequenceKv seq(c.n_layers);
    LlamaForward fwd(*model_, *backend_, pool);
    std::vector<float> logits;
    for (int64_t pos = 0; pos < 600;) {
      const auto step = comp->NextPrefill(prompt, pos, 64, seq);
      ForwardRequest req{step.tokens, pos, &seq, false, comp->window(), step.probe_tokens, step.probe_start_pos};
      logits.clear();
      EXPECT_TRUE(fwd.Step({&req, 1}, &logits).ok());
      pos += step.prompt_tokens;
      EXPECT_TRUE(comp->AfterStep(*backend_, pool, seq, pos == 600).ok());
    }
    for (int64_t len : seq.layer_len) EXPECT_EQ(len, 60);
    *peak_pages = pool.stats().pages_peak;
    const std::pair<int64_t, int64_t> first[] = {{0, 12}};
    const double share = comp->kept_positions()->ShareHoldingSpans(c.n_kv_heads, first);
    seq.Release(pool);
    return share;
  };
  int64_t peak_scored = 0, peak_sunk = 0;
  EXPECT_LT(share_holding_first(std::nullopt, &peak_scored), 1.0);
  EXPECT_EQ(share_holding_first(12, &peak_sunk), 1.0);
  EXPECT_EQ(peak_sunk, peak_scored);
}

}  // namespace
}  // namespace kvserve
