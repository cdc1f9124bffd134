// The resolved compression settings: name tables, the check, the budget view, the policy factory.
#include "engine/compress/compression_settings.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "engine/compress/basic_policies.h"
#include "engine/compress/criticalkv_policy.h"
#include "engine/compress/keydiff_policy.h"
#include "engine/compress/kv_settings.h"
#include "engine/compress/merge_reduce_policy.h"
#include "engine/compress/snapkv_policy.h"

namespace kvserve {

namespace {
constexpr std::string_view kCompressAtNames[] = {"prefill_end", "chunk"};  // CompressAt's order
constexpr std::string_view kChunkScoringNames[] = {"question", "window", "question_at_end"};  // ChunkScoring's order
constexpr std::string_view kEvictedWeightNames[] = {"drop", "merge", "merge-near", "merge-values",
                                                     "merge-mid"};  // EvictedWeight's order
}  // namespace

absl::Span<const std::string_view> EvictedWeightNames() { return kEvictedWeightNames; }
std::string_view EvictedWeightName(EvictedWeight w) { return kEvictedWeightNames[static_cast<size_t>(w)]; }
bool MergesAt(EvictedWeight w, bool mid_prompt) {
  return w != EvictedWeight::kDrop && (w != EvictedWeight::kMergeMid || mid_prompt);
}
float MergeRadius(EvictedWeight w) {
  return w == EvictedWeight::kMerge ? std::numeric_limits<float>::infinity() : kMergeNearRadius;
}
bool MergesValues(EvictedWeight w) { return w == EvictedWeight::kMergeValues; }

absl::Span<const std::string_view> CompressAtNames() { return kCompressAtNames; }
std::string_view CompressAtName(CompressAt at) { return kCompressAtNames[static_cast<size_t>(at)]; }

absl::Span<const std::string_view> ChunkScoringNames() { return kChunkScoringNames; }
std::string_view ChunkScoringName(ChunkScoring scoring) { return kChunkScoringNames[static_cast<size_t>(scoring)]; }

namespace {

// Every KV policy: its name (requests, flags, metrics) and how it is made. A new policy is
// its class's file plus one row here.
struct KvPolicyRow {
  const char* name;
  std::unique_ptr<KvPolicy> (*make)(const CompressionSettings& s);
};

const std::vector<KvPolicyRow>& KvPolicyTable() {
  static const std::vector<KvPolicyRow> rows = {
      {"full", [](const CompressionSettings&) -> std::unique_ptr<KvPolicy> { return std::make_unique<FullPolicy>(); }},
      {"streaming",
       [](const CompressionSettings& s) -> std::unique_ptr<KvPolicy> {
         return std::make_unique<StreamingLlmPolicy>(SinkTokens(s));
       }},
      {"snapkv",
       [](const CompressionSettings& s) -> std::unique_ptr<KvPolicy> {
         return std::make_unique<SnapKvPolicy>(s.policy, s.pool_kernel);
       }},
      {"criticalkv",
       [](const CompressionSettings& s) -> std::unique_ptr<KvPolicy> {
         return std::make_unique<CriticalKvPolicy>(s.pool_kernel, s.first_stage_ratio);
       }},
      // SnapKV's selection under the PyramidKV budget plan (PlanOf).
      {"pyramid",
       [](const CompressionSettings& s) -> std::unique_ptr<KvPolicy> {
         return std::make_unique<SnapKvPolicy>(s.policy, s.pool_kernel);
       }},
      {"keydiff",
       [](const CompressionSettings&) -> std::unique_ptr<KvPolicy> { return std::make_unique<KeyDiffPolicy>(); }},
      {"mergereduce:random",
       [](const CompressionSettings& s) -> std::unique_ptr<KvPolicy> {
         return std::make_unique<MergeReducePolicy>(s.policy, MakeReducer("random", ReduceProtectedDims(s)),
                                                    s.reduce_seed, SinkTokens(s));
       }},
      {"mergereduce:cluster",
       [](const CompressionSettings& s) -> std::unique_ptr<KvPolicy> {
         return std::make_unique<MergeReducePolicy>(s.policy, MakeReducer("cluster", ReduceProtectedDims(s)),
                                                    s.reduce_seed, SinkTokens(s));
       }},
  };
  return rows;
}

}  // namespace

const std::vector<std::string>& KvPolicyNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const KvPolicyRow& row : KvPolicyTable()) n.emplace_back(row.name);
    return n;
  }();
  return names;
}

bool IsMergeReducePolicy(std::string_view p) { return p == "mergereduce:random" || p == "mergereduce:cluster"; }

int64_t ReduceProtectedDims(const CompressionSettings& s) { return s.reduce_protected_dims; }

int64_t SinkTokens(const CompressionSettings& s) {
  if (s.n_sink) return *s.n_sink;
  return s.policy == "streaming" || IsMergeReducePolicy(s.policy) ? 4 : 0;
}

BudgetPlan PlanOf(const CompressionSettings& s) {
  if (s.plan) return *s.plan;
  return s.policy == "pyramid" ? BudgetPlan::kPyramid : BudgetPlan::kUniform;
}

EvictedWeight EvictedWeightOf(const CompressionSettings& s) {
  if (s.evicted_weight) return *s.evicted_weight;
  const bool measured = s.policy == "snapkv" || s.policy == "criticalkv";
  return s.at == CompressAt::kChunk && measured ? EvictedWeight::kMergeMid : EvictedWeight::kDrop;
}

BudgetSpec BudgetOf(const CompressionSettings& s) {
  return BudgetSpec{s.budget, PlanOf(s), s.layer_quota, s.ripple.get(), s.ripple_params, s.window};
}

absl::Status ValidateCompressionSettings(const CompressionSettings& s, int64_t n_layers) {
  // Every value set, so each range and consistency rule of ValidateKvSettings applies.
  KvSettings all;
  all.policy = s.policy;
  // auto_risk 0 is "off" in the resolved struct; a budget then applies.
  if (s.auto_risk != 0) {
    all.auto_risk = s.auto_risk;
  } else {
    all.budget = s.budget;
  }
  all.plan = s.plan;
  if (!s.layer_quota.empty()) all.layer_quota = s.layer_quota;
  all.compress_at = s.at;
  all.chunk_scoring = s.chunk_scoring;
  all.question_tokens = s.question_tokens;
  // Only chunk mode reads it (a server-wide headroom stays set for prefill_end requests).
  if (s.at == CompressAt::kChunk) all.chunk_headroom = s.chunk_headroom;
  // A server-wide merge stays set for merge-reduce requests, which weight their own entries.
  if (!IsMergeReducePolicy(s.policy)) all.evicted_weight = s.evicted_weight;
  all.first_stage_ratio = s.first_stage_ratio;
  all.window = s.window;
  all.pool_kernel = s.pool_kernel;
  all.reduce_protected_dims = s.reduce_protected_dims;
  all.sink_tokens = s.n_sink;
  all.ripple_r = s.ripple_params.r;
  all.ripple_gamma = s.ripple_params.gamma;
  if (absl::Status st = ValidateKvSettings(all, KvSource::kEngine, n_layers); !st.ok()) return st;
  if (s.policy == "pyramid" && PlanOf(s) != BudgetPlan::kPyramid) {
    return absl::InvalidArgumentError(absl::StrCat("KV policy pyramid needs budget plan pyramid, got '",
                                                   std::string(BudgetPlanName(PlanOf(s))), "'"));
  }
  return CheckPlanInputs(BudgetOf(s), n_layers);
}

absl::StatusOr<std::unique_ptr<KvPolicy>> MakeKvPolicy(const CompressionSettings& s) {
  if (absl::StatusOr<std::string> known = ParseKvPolicy(s.policy); !known.ok()) return known.status();
  for (const KvPolicyRow& row : KvPolicyTable()) {
    if (s.policy == row.name) return row.make(s);
  }
  return absl::InternalError(absl::StrCat("KV policy '", s.policy, "' is named but has no row"));
}

}  // namespace kvserve
