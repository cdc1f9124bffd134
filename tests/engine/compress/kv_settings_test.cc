// KvSettings: names parsed from the one tables (unknown ones named, with the knob as each
// source spells it), the one check, and the resolution over defaults (a request's budget
// replaces auto:RISK, a chat prompt's short last turn is the question in question-scored
// chunk mode only).
#include "engine/compress/kv_settings.h"

#include <cmath>
#include <string>

#include "gtest/gtest.h"

namespace kvserve {
namespace {

CompressionSettings ChunkDefaults() {
  CompressionSettings d;
  d.policy = "snapkv";
  d.budget = 0.1;
  d.window = 16;
  d.at = CompressAt::kChunk;
  d.chunk_scoring = ChunkScoring::kQuestion;
  return d;
}

bool Says(const absl::Status& st, const std::string& text) {
  return st.message().find(text) != std::string_view::npos;
}

TEST(KvSettingsTest, AShortLastChatTurnIsTheQuestion) {
  KvSettings kv;
  EXPECT_EQ(ResolveKvSettings(kv, ChunkDefaults(), 40).question_tokens, 40);
  // A turn holding a document is no question: the window stays.
  EXPECT_FALSE(ResolveKvSettings(kv, ChunkDefaults(), kMaxChatQuestionTokens + 1).question_tokens.has_value());
  // The request's own span wins.
  kv.question_tokens = 7;
  EXPECT_EQ(ResolveKvSettings(kv, ChunkDefaults(), 40).question_tokens, 7);
}

TEST(KvSettingsTest, TheChatTurnIsIgnoredWhereNoQuestionIsProbed) {
  KvSettings kv;
  kv.compress_at = CompressAt::kPrefillEnd;
  CompressionSettings s = ResolveKvSettings(kv, ChunkDefaults(), 40);
  EXPECT_EQ(s.at, CompressAt::kPrefillEnd);
  EXPECT_FALSE(s.question_tokens.has_value());
  EXPECT_TRUE(ValidateCompressionSettings(s, 4).ok());  // would fail with a question span
  kv.compress_at.reset();
  kv.chunk_scoring = ChunkScoring::kWindow;
  EXPECT_FALSE(ResolveKvSettings(kv, ChunkDefaults(), 40).question_tokens.has_value());
}

TEST(KvSettingsTest, OverridesReplaceDefaultsAndABudgetReplacesAutoRisk) {
  CompressionSettings defaults = ChunkDefaults();
  defaults.at = CompressAt::kPrefillEnd;
  defaults.auto_risk = 0.3;
  KvSettings kv;
  EXPECT_EQ(ResolveKvSettings(kv, defaults).auto_risk, 0.3);  // nothing set: the defaults
  kv.budget = 64;
  kv.policy = "criticalkv";
  kv.plan = BudgetPlan::kPyramid;
  const CompressionSettings s = ResolveKvSettings(kv, defaults);
  EXPECT_EQ(s.budget, 64);
  EXPECT_EQ(s.auto_risk, 0);
  EXPECT_EQ(s.policy, "criticalkv");
  EXPECT_EQ(PlanOf(s), BudgetPlan::kPyramid);
  EXPECT_EQ(s.window, 16);
}

TEST(KvSettingsTest, UnknownNamesAreNamedAsTheirSourceSpellsThem) {
  EXPECT_TRUE(Says(ParseCompressAt("sometimes", KvSource::kProto).status(),
                   "kv.compress_at 'sometimes' is unknown; use one of prefill_end, chunk"));
  EXPECT_TRUE(Says(ParseChunkScoring("vibes", KvSource::kFlags).status(), "--chunk-scoring 'vibes'"));
  EXPECT_TRUE(Says(ParseKvBudgetPlan("zigzag", KvSource::kProto).status(), "uniform, pyramid, ripple"));
  const absl::Status policy = ParseKvPolicy("h2o", KvSource::kFlags).status();
  EXPECT_EQ(policy.code(), absl::StatusCode::kInvalidArgument);
  for (const std::string& name : KvPolicyNames()) EXPECT_TRUE(Says(policy, name)) << policy;
}

TEST(KvSettingsTest, OneCheckNamesTheFieldOrTheFlag) {
  KvSettings kv;
  kv.window = 5000;
  EXPECT_TRUE(Says(ValidateKvSettings(kv, KvSource::kProto, 2), "kv.window must be in [1, 4096], got 5000"));
  EXPECT_TRUE(Says(ValidateKvSettings(kv, KvSource::kFlags, 2), "--kv-window must be in [1, 4096], got 5000"));
  kv = {};
  kv.question_tokens = 8;
  kv.compress_at = CompressAt::kPrefillEnd;
  EXPECT_TRUE(Says(ValidateKvSettings(kv, KvSource::kFlags, 2), "--question-tokens 8 needs --compress-at chunk"));
  kv = {};
  kv.layer_quota = std::vector<int64_t>{8};
  EXPECT_TRUE(Says(ValidateKvSettings(kv, KvSource::kProto, 2), "kv.layer_budgets has 1 entries"));
  EXPECT_TRUE(ValidateKvSettings(kv, KvSource::kProto, 1).ok());
  kv = {};
  EXPECT_TRUE(ValidateKvSettings(kv, KvSource::kProto, 2).ok()) << "nothing set: nothing to check";
}

TEST(KvSettingsTest, PolicySpecsSetPolicyPlanAndMode) {
  absl::StatusOr<KvSettings> kv = ParsePolicySpec("criticalkv@pyramid/chunk:window");
  ASSERT_TRUE(kv.ok()) << kv.status();
  EXPECT_EQ(kv->policy, "criticalkv");
  EXPECT_EQ(kv->plan, BudgetPlan::kPyramid);
  EXPECT_EQ(kv->compress_at, CompressAt::kChunk);
  EXPECT_EQ(kv->chunk_scoring, ChunkScoring::kWindow);
  EXPECT_EQ(ParsePolicySpec("snapkv/chunk").value().chunk_scoring, ChunkScoring::kQuestion);
  EXPECT_EQ(ParsePolicySpec("snapkv/chunk:question_at_end").value().chunk_scoring, ChunkScoring::kQuestionAtEnd);
  EXPECT_EQ(ChunkScoringName(ChunkScoring::kQuestionAtEnd), "question_at_end");
  EXPECT_FALSE(ParsePolicySpec("snapkv").value().plan.has_value());
  EXPECT_TRUE(Says(ParsePolicySpec("snapkv/sometimes").status(), "unknown compression mode 'sometimes'"));
  EXPECT_TRUE(Says(ParsePolicySpec("h2o").status(), "'h2o'"));
  EXPECT_TRUE(Says(ParsePolicySpec("snapkv@zigzag").status(), "'zigzag'"));
}

TEST(KvSettingsTest, EvictedWeightComesFromARowSuffixTheFlagOrTheField) {
  absl::StatusOr<KvSettings> kv = ParsePolicySpec("criticalkv@pyramid/chunk+merge");
  ASSERT_TRUE(kv.ok()) << kv.status();
  EXPECT_EQ(kv->evicted_weight, EvictedWeight::kMerge);
  EXPECT_EQ(kv->compress_at, CompressAt::kChunk);
  EXPECT_EQ(kv->plan, BudgetPlan::kPyramid);
  EXPECT_EQ(ParsePolicySpec("snapkv+drop").value().evicted_weight, EvictedWeight::kDrop);
  EXPECT_FALSE(ParsePolicySpec("snapkv/chunk").value().evicted_weight.has_value());
  EXPECT_TRUE(Says(ParsePolicySpec("snapkv/chunk+keep").status(), "unknown evicted weight 'keep'"));
  EXPECT_TRUE(Says(ParseEvictedWeight("average", KvSource::kProto).status(),
                   "kv.evicted_weight 'average' is unknown; use one of drop, merge, merge-near, merge-values, "
                   "merge-mid"));
  EXPECT_EQ(ParsePolicySpec("snapkv/chunk+merge-near").value().evicted_weight, EvictedWeight::kMergeNear);
  EXPECT_EQ(ParseEvictedWeight("merge-near", KvSource::kProto).value(), EvictedWeight::kMergeNear);
  EXPECT_EQ(MergeRadius(EvictedWeight::kMergeNear), kMergeNearRadius);
  EXPECT_EQ(MergeRadius(EvictedWeight::kMerge), INFINITY);
  EXPECT_EQ(ParsePolicySpec("criticalkv/chunk+merge-values").value().evicted_weight, EvictedWeight::kMergeValues);
  EXPECT_EQ(MergeRadius(EvictedWeight::kMergeValues), kMergeNearRadius);
  EXPECT_TRUE(MergesValues(EvictedWeight::kMergeValues));
  EXPECT_FALSE(MergesValues(EvictedWeight::kMergeNear));
  EXPECT_EQ(ParsePolicySpec("snapkv/chunk+merge-mid").value().evicted_weight, EvictedWeight::kMergeMid);
  EXPECT_EQ(MergeRadius(EvictedWeight::kMergeMid), kMergeNearRadius);
  EXPECT_FALSE(MergesValues(EvictedWeight::kMergeMid));
  // merge-mid merges only at a mid-prompt cut; the others merge at every cut or none.
  EXPECT_TRUE(MergesAt(EvictedWeight::kMergeMid, true));
  EXPECT_FALSE(MergesAt(EvictedWeight::kMergeMid, false));
  EXPECT_TRUE(MergesAt(EvictedWeight::kMergeNear, false));
  EXPECT_FALSE(MergesAt(EvictedWeight::kDrop, true));
  EXPECT_TRUE(Says(ParseEvictedWeight("average", KvSource::kFlags).status(), "--evicted-weight 'average'"));
  // Unset it is the server's, and unset there: merge-mid for SnapKV and CriticalKV in chunk
  // mode, drop at prefill_end and for the policies not measured with it; set, the request's wins.
  CompressionSettings server;
  EXPECT_FALSE(ResolveKvSettings(KvSettings{}, server).evicted_weight.has_value());
  KvSettings chunk;
  chunk.compress_at = CompressAt::kChunk;
  for (const char* policy : {"snapkv", "criticalkv", "keydiff", "streaming", "pyramid"}) {
    chunk.policy = policy;
    const bool measured = std::string_view(policy) == "snapkv" || std::string_view(policy) == "criticalkv";
    EXPECT_EQ(EvictedWeightOf(ResolveKvSettings(chunk, server)),
              measured ? EvictedWeight::kMergeMid : EvictedWeight::kDrop) << policy;
    KvSettings at_end = chunk;
    at_end.compress_at = CompressAt::kPrefillEnd;
    EXPECT_EQ(EvictedWeightOf(ResolveKvSettings(at_end, server)), EvictedWeight::kDrop) << policy;
  }
  server.evicted_weight = EvictedWeight::kMerge;
  EXPECT_EQ(ResolveKvSettings(KvSettings{}, server).evicted_weight, EvictedWeight::kMerge);
  chunk.policy = "snapkv";
  EXPECT_EQ(EvictedWeightOf(ResolveKvSettings(chunk, server)), EvictedWeight::kMerge);
  KvSettings request = chunk;
  request.evicted_weight = EvictedWeight::kDrop;
  EXPECT_EQ(EvictedWeightOf(ResolveKvSettings(request, server)), EvictedWeight::kDrop);
  EXPECT_EQ(EvictedWeightName(EvictedWeight::kMerge), "merge");
  // Asked together with merge-reduce, which weights its own entries: refused, naming both.
  KvSettings both;
  both.policy = "mergereduce:cluster";
  both.evicted_weight = EvictedWeight::kMerge;
  EXPECT_TRUE(Says(ValidateKvSettings(both, KvSource::kProto, 2),
                   "kv.evicted_weight merge applies to the scoring policies; kv.policy mergereduce:cluster"));
  both.evicted_weight = EvictedWeight::kMergeNear;
  EXPECT_TRUE(Says(ValidateKvSettings(both, KvSource::kFlags, 2),
                   "--evicted-weight merge-near applies to the scoring policies; --kv-policy mergereduce:cluster"));
  // A server-wide merge does not refuse a merge-reduce request.
  CompressionSettings resolved = ResolveKvSettings(KvSettings{}, server);
  resolved.policy = "mergereduce:cluster";
  EXPECT_TRUE(ValidateCompressionSettings(resolved, 2).ok());
}

}  // namespace
}  // namespace kvserve
