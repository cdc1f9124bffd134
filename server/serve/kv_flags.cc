// The --kv-* flags into KvSettings (their one parser), with errors that name flag and value.
#include "server/serve/kv_flags.h"

#include <optional>
#include <string_view>
#include <utility>
#include <type_traits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/compress/auto_budget.h"
#include "engine/kv/page_pool.h"

namespace kvserve {

namespace {

std::string Names(absl::Span<const std::string_view> names) {
  return absl::StrJoin(names, "|", [](std::string* out, std::string_view n) { out->append(n); });
}

// An optional numeric flag: unset when absent; the error names the flag.
template <typename T>
absl::Status ReadNumber(const CliArgs& a, const std::string& flag, std::optional<T>* out) {
  if (!a.Get(flag)) return absl::OkStatus();
  absl::StatusOr<T> v;
  if constexpr (std::is_integral_v<T>) {
    v = a.GetInt(flag, 0);
  } else {
    v = a.GetDouble(flag, 0);
  }
  if (!v.ok()) return v.status();
  *out = *v;
  return absl::OkStatus();
}

}  // namespace

const std::vector<std::string>& KvFlagNames() {
  static const std::vector<std::string> names = {"kv-policy",   "kv-budget",         "budget-plan", "compress-at",
                                                 "kv-window",   "first-stage-ratio", "pool-kernel", "sink-tokens",
                                                 "ripple-r",    "ripple-gamma",      "reduce-protected-dims",
                                                 "kv-dtype",    "chunk-scoring",     "question-tokens", "chunk-headroom",
                                                 "evicted-weight"};
  return names;
}

const std::string& KvFlagsHelp() {
  static const std::string help = [] {
    const CompressionSettings d;
    const std::vector<std::string>& policies = KvPolicyNames();
    return absl::StrCat(
        "  [--kv-policy ", absl::StrJoin(policies, "|"), "=", d.policy, "]\n",
        "  [--kv-budget F|N|auto:RISK=", d.budget, "]",
        "  (fraction <= 1 of the prompt, tokens per layer, or picked per request from the prompt's\n"
        "  estimated risk, with prefill_end) [--budget-plan ", Names(BudgetPlanNames()), ":PROFILE.json]\n",
        "  [--ripple-r R=", d.ripple_params.r, "] [--ripple-gamma G=", d.ripple_params.gamma, "] [--compress-at ",
        Names(CompressAtNames()), "=", std::string(CompressAtName(d.at)), "]\n",
        "  [--chunk-scoring ", Names(ChunkScoringNames()), "=", std::string(ChunkScoringName(d.chunk_scoring)),
        "] (chunk mode: score each chunk with the question's\n"
        "  queries or the chunk's own) [--question-tokens N (the prompt's last N tokens; default the window)]\n",
        "  [--chunk-headroom N=", d.chunk_headroom, "] (chunk mode: entries above the budget during the prompt)\n",
        "  [--evicted-weight ", Names(EvictedWeightNames()), "] (merge: each evicted entry's weight goes to the\n"
        "  kept entry with the nearest key; merge-near: only when that key is within half the evicted key's\n"
        "  length, else dropped; merge-values: merge-near, and each kept value becomes the weighted mean of\n"
        "  the values merged into it; merge-mid: merge-near at chunk mode's mid-prompt cuts, drop at the\n"
        "  prompt's end; default merge-mid in chunk mode with snapkv or criticalkv, else drop)\n",
        "  [--kv-window N=", d.window, "] [--first-stage-ratio R=", d.first_stage_ratio, "] [--pool-kernel K=",
        d.pool_kernel, "] [--sink-tokens N] (the prompt's first N entries always kept;\n"
        "  default 4 with streaming and merge-reduce, 0 with the scoring policies)\n",
        "  [--reduce-protected-dims M=", d.reduce_protected_dims, " (mergereduce:cluster, capped at head_dim)]\n",
        "  [--kv-dtype f32|f16] (K/V storage; default f16 on the CPU, f32 on CUDA, which takes only f32)\n");
  }();
  return help;
}

namespace {
// --kv-dtype's values: the one table that parsing and KvDTypeFlagName read.
constexpr std::pair<std::string_view, DType> kKvDTypes[] = {{"f32", DType::kF32}, {"f16", DType::kF16}};
}  // namespace

absl::StatusOr<DType> KvDTypeFromArgs(const CliArgs& a, const Backend& backend) {
  const std::optional<std::string> given = a.Get("kv-dtype");
  if (!given) return DefaultKvDType(backend);
  for (const auto& [name, dtype] : kKvDTypes) {
    if (*given == name) return dtype;
  }
  return absl::InvalidArgumentError(absl::StrCat("--kv-dtype must be f32 or f16, got '", *given, "'"));
}

std::string_view KvDTypeFlagName(DType dtype) {
  for (const auto& [name, d] : kKvDTypes) {
    if (d == dtype) return name;
  }
  return DTypeName(dtype);
}

absl::StatusOr<KvSettings> KvSettingsFromArgs(const CliArgs& a, const Model& model) {
  constexpr KvSource kFlags = KvSource::kFlags;
  KvSettings kv;
  if (auto p = a.Get("kv-policy")) {
    absl::StatusOr<std::string> policy = ParseKvPolicy(*p, kFlags);
    if (!policy.ok()) return policy.status();
    kv.policy = *std::move(policy);
  }
  if (auto p = a.Get("budget-plan")) {
    if (absl::StartsWith(*p, "ripple:")) {
      auto profile = LoadRippleProfileFor(p->substr(7), model);
      if (!profile.ok()) return profile.status();
      kv.ripple_profile = *std::move(profile);
      kv.plan = BudgetPlan::kRipple;
    } else if (*p == "ripple") {
      return absl::InvalidArgumentError("--budget-plan ripple needs a profile: --budget-plan ripple:PROFILE.json");
    } else {
      absl::StatusOr<BudgetPlan> plan = ParseKvBudgetPlan(*p, kFlags);
      if (!plan.ok()) return plan.status();
      kv.plan = *plan;
    }
  }
  if (auto p = a.Get("compress-at")) {
    absl::StatusOr<CompressAt> at = ParseCompressAt(*p, kFlags);
    if (!at.ok()) return at.status();
    kv.compress_at = *at;
  }
  if (auto p = a.Get("evicted-weight")) {
    absl::StatusOr<EvictedWeight> evicted = ParseEvictedWeight(*p, kFlags);
    if (!evicted.ok()) return evicted.status();
    kv.evicted_weight = *evicted;
  }
  if (auto p = a.Get("chunk-scoring")) {
    absl::StatusOr<ChunkScoring> scoring = ParseChunkScoring(*p, kFlags);
    if (!scoring.ok()) return scoring.status();
    kv.chunk_scoring = *scoring;
  }
  // --kv-budget auto:RISK picks the budget per request (auto_budget.h); a number fixes it.
  if (auto p = a.Get("kv-budget"); p && absl::StartsWith(*p, "auto")) {
    absl::StatusOr<double> risk = ParseAutoBudget(*p);
    if (!risk.ok()) return absl::InvalidArgumentError(absl::StrCat("--kv-budget: ", risk.status().message()));
    kv.auto_risk = *risk;
  } else if (absl::Status st = ReadNumber(a, "kv-budget", &kv.budget); !st.ok()) {
    return st;
  }
  for (absl::Status st : {ReadNumber(a, "question-tokens", &kv.question_tokens),
                          ReadNumber(a, "chunk-headroom", &kv.chunk_headroom),
                          ReadNumber(a, "first-stage-ratio", &kv.first_stage_ratio),
                          ReadNumber(a, "kv-window", &kv.window), ReadNumber(a, "pool-kernel", &kv.pool_kernel),
                          ReadNumber(a, "reduce-protected-dims", &kv.reduce_protected_dims),
                          ReadNumber(a, "sink-tokens", &kv.sink_tokens), ReadNumber(a, "ripple-r", &kv.ripple_r),
                          ReadNumber(a, "ripple-gamma", &kv.ripple_gamma)}) {
    if (!st.ok()) return st;
  }
  if (absl::Status st = ValidateKvSettings(kv, kFlags, model.config.n_layers); !st.ok()) return st;
  return kv;
}

absl::StatusOr<CompressionSettings> CompressionFromArgs(const CliArgs& a, const Model& model) {
  absl::StatusOr<KvSettings> kv = KvSettingsFromArgs(a, model);
  if (!kv.ok()) return kv.status();
  CompressionSettings s = ResolveKvSettings(*kv, CompressionSettings{});
  if (absl::Status st = ValidateCompressionSettings(s, model.config.n_layers); !st.ok()) return st;
  return s;
}

}  // namespace kvserve
