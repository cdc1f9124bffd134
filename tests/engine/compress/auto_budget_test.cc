// --kv-budget auto:RISK: the budget is the smallest that meets the risk, a lower risk never
// buys fewer entries, bad text is refused by name, and inside a sequence the quotas follow
// the prompt's own estimate and the reservation shrinks to them.
#include "engine/compress/auto_budget.h"

#include "engine/compress/sequence_compressor.h"
#include "engine/model/forward.h"
#include "engine/scheduler/scheduler.h"
#include "gtest/gtest.h"
#include "tests/engine/compress/tiny_generation_fixture.h"

namespace kvserve {
namespace {

CompressibilityEstimate TwoLayers() {
  // Two layers of 1,000 entries, each sampled by 128: one whose values fall into few
  // clusters (the share drops fast) and one whose values spread (it drops slowly).
  CompressibilityEstimate e;
  e.layers.resize(2);
  e.layers[0].value_unexplained = {2.0, 1.0, 0.5, 0.25, 0.12, 0.06, 0.03, 0.0};
  e.layers[1].value_unexplained = {2.0, 1.5, 1.2, 0.9, 0.7, 0.5, 0.3, 0.0};
  for (LayerCompressibility& l : e.layers) {
    l.sample = 128;
    l.entries = 1000;
  }
  return e;
}

TEST(AutoBudgetTest, PicksTheSmallestBudgetThatMeetsTheRisk) {
  const CompressibilityEstimate e = TwoLayers();
  int64_t previous = 0;
  for (double risk : {2.0, 1.0, 0.5, 0.3, 0.2, 0.1, 0.05}) {  // falling risk: rising budget
    const int64_t k = AutoBudgetTokens(e, risk, 5, 100000);
    ASSERT_GE(k, 5);
    EXPECT_LE(e.RiskAt(k), risk) << risk;
    if (k > 5) {
      EXPECT_GT(e.RiskAt(k - 1), risk) << risk;
    }
    EXPECT_GE(k, previous) << risk;
    previous = k;
  }
  EXPECT_GT(previous, 5);
  // A risk no budget meets keeps everything; k_min past n is capped at n.
  EXPECT_EQ(AutoBudgetTokens(e, 1e-9, 5, 300), 300);
  EXPECT_EQ(AutoBudgetTokens(e, 100.0, 500, 300), 300);
}

TEST(AutoBudgetTest, ParsesAutoRiskAndNamesBadText) {
  ASSERT_TRUE(ParseAutoBudget("auto:0.25").ok());
  EXPECT_EQ(*ParseAutoBudget("auto:0.25"), 0.25);
  for (const char* bad : {"auto:", "auto:0", "auto:-1", "auto:x", "0.5", "auto:inf"}) {
    const absl::StatusOr<double> r = ParseAutoBudget(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find(bad), std::string::npos) << r.status();
  }
  CompressionSettings s;
  s.policy = "snapkv";
  s.auto_risk = 0.5;
  EXPECT_TRUE(ValidateCompressionSettings(s, 2).ok());
  s.at = CompressAt::kChunk;
  const absl::Status st = ValidateCompressionSettings(s, 2);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("prefill_end"), std::string::npos) << st;
}

class AutoBudgetSequenceTest : public TinyGenerationTest {
 protected:
  // Prefills prompt_len tokens under kv and returns the compressor after the prompt end.
  std::unique_ptr<SequenceCompressor> Prefill(const CompressionSettings& kv, int64_t prompt_len,
                                              std::vector<int64_t>* lens, int64_t* reserved) {
    const ModelConfig& c = model_->config;
    auto made = SequenceCompressor::Create(*model_, kv, prompt_len, 8, 16, 128);
    EXPECT_TRUE(made.ok()) << made.status();
    if (!made.ok()) return nullptr;
    std::unique_ptr<SequenceCompressor> comp = *std::move(made);
    PagePool pool({comp->PeakPages() + 8, 16, c.n_kv_heads, c.head_dim});
    SequenceKv seq(c.n_layers);
    EXPECT_TRUE(seq.Reserve(pool, comp->PeakPages()).ok());
    LlamaForward fwd(*model_, *backend_, pool);
    const std::vector<int32_t> tokens = Prompt(static_cast<int>(prompt_len));
    std::vector<float> logits;
    for (int64_t pos = 0; pos < prompt_len; pos += 128) {
      const auto span = absl::MakeConstSpan(tokens).subspan(pos, std::min<int64_t>(128, prompt_len - pos));
      ForwardRequest req{span, pos, &seq, false, comp->window()};
      logits.clear();
      EXPECT_TRUE(fwd.Step({&req, 1}, &logits).ok());
      EXPECT_TRUE(comp->AfterStep(*backend_, pool, seq, pos + 128 >= prompt_len).ok());
    }
    *lens = seq.layer_len;
    *reserved = seq.reserved_pages;
    seq.Release(pool);
    return comp;
  }
};

TEST_F(AutoBudgetSequenceTest, QuotasFollowThePromptsEstimate) {
  const int64_t prompt_len = 300;
  for (const char* policy : {"snapkv", "criticalkv", "mergereduce:cluster"}) {
    double previous_quota = 0;
    for (double risk : {5.0, 0.05}) {
      CompressionSettings kv;
      kv.policy = policy;
      kv.window = kv.recent_window = 16;
      kv.auto_risk = risk;
      std::vector<int64_t> lens;
      int64_t reserved = 0;
      const std::unique_ptr<SequenceCompressor> comp = Prefill(kv, prompt_len, &lens, &reserved);
      ASSERT_NE(comp, nullptr);
      ASSERT_FALSE(comp->compressibility().empty());
      const int64_t k = AutoBudgetTokens(comp->compressibility(), risk, kv.window + SinkTokens(kv), prompt_len);
      EXPECT_EQ(comp->mean_quota(), static_cast<double>(k)) << policy << " risk " << risk;
      EXPECT_GE(comp->mean_quota(), previous_quota) << policy << " risk " << risk;
      previous_quota = comp->mean_quota();
      for (size_t l = 0; l < lens.size(); ++l) {
        // Merge-reduce keeps its window, sinks and at least one bucket, whatever the quota.
        const int64_t bound = comp->merge_reduce()
            ? MergeReduceBuckets::SteadyBound(comp->merge_reduce()->shape(static_cast<int64_t>(l)), prompt_len + 8)
            : comp->quotas()[l];
        EXPECT_LE(lens[l], bound) << policy;
      }
      // After the prompt the reservation is the chosen budget's, not the whole prompt's.
      EXPECT_EQ(reserved, comp->DecodePeakPages()) << policy;
      if (k < prompt_len) {
        EXPECT_LE(comp->EstimatedRisk(), risk) << policy;
      }
    }
  }
}

TEST_F(AutoBudgetSequenceTest, SchedulerTakesAutoFromTheRequestAndReportsWhatItPicked) {
  const ModelConfig& c = model_->config;
  PagePool pool({600, 16, c.n_kv_heads, c.head_dim});
  Scheduler sched(*model_, *tokenizer_, *backend_, pool, SchedulerConfig{});
  StreamEvent last;
  EngineRequest r;
  r.prompt = Prompt(300);
  r.max_new_tokens = 2;
  r.ignore_eos = true;
  r.kv.policy = "snapkv";
  r.kv.window = 16;
  r.kv.auto_risk = 0.5;
  r.sink = [&](const StreamEvent& e) { if (e.finished) last = e; };
  EngineRequest chunked = r;
  chunked.kv.compress_at = CompressAt::kChunk;
  chunked.sink = {};
  EXPECT_EQ(sched.Submit(std::move(chunked)).status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(sched.Submit(std::move(r)).ok());
  while (!sched.idle()) ASSERT_TRUE(sched.StepAndDeliver().ok());
  ASSERT_TRUE(last.status.ok()) << last.status;
  EXPECT_GE(last.kv_mean_quota, 20);
  EXPECT_LE(last.kv_mean_quota, 300);
  EXPECT_GT(last.kv_compressibility.mean.trace, 0);
}

}  // namespace
}  // namespace kvserve
