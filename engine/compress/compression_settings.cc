#include "engine/compress/compression_settings.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/compress/basic_policies.h"
#include "engine/compress/criticalkv_policy.h"
#include "engine/compress/keydiff_policy.h"
#include "engine/compress/merge_reduce_policy.h"
#include "engine/compress/snapkv_policy.h"

namespace kvserve {

absl::StatusOr<CompressAt> ParseCompressAt(std::string_view name) {
  if (name == "prefill_end") return CompressAt::kPrefillEnd;
  if (name == "chunk") return CompressAt::kChunk;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown compress_at '", std::string(name), "' (expected prefill_end or chunk)"));
}

std::string_view CompressAtName(CompressAt at) { return at == CompressAt::kChunk ? "chunk" : "prefill_end"; }

absl::StatusOr<ChunkScoring> ParseChunkScoring(std::string_view name) {
  if (name == "question") return ChunkScoring::kQuestion;
  if (name == "window") return ChunkScoring::kWindow;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown chunk_scoring '", std::string(name), "' (expected question or window)"));
}

std::string_view ChunkScoringName(ChunkScoring scoring) {
  return scoring == ChunkScoring::kWindow ? "window" : "question";
}

const std::vector<std::string>& KvPolicyNames() {
  static const std::vector<std::string> names = {"full",    "streaming",          "snapkv",
                                                 "criticalkv", "pyramid",      "keydiff",
                                                 "mergereduce:random", "mergereduce:cluster"};
  return names;
}

namespace {

bool KnownPolicy(std::string_view p) {
  const std::vector<std::string>& names = KvPolicyNames();
  return std::find(names.begin(), names.end(), p) != names.end();
}

// What the paper protects (64 or 128 directions); ClusterReducer caps it at head_dim.
constexpr int64_t kDefaultProtectedDims = 128;

std::string PlanOf(const CompressionSettings& s) {
  if (!s.plan.empty()) return s.plan;
  return s.policy == "pyramid" ? "pyramid" : "uniform";
}

}  // namespace

bool IsMergeReducePolicy(std::string_view p) { return p == "mergereduce:random" || p == "mergereduce:cluster"; }

int64_t ReduceProtectedDims(const CompressionSettings& s) {
  return s.reduce_protected_dims > 0 ? s.reduce_protected_dims : kDefaultProtectedDims;
}

absl::Status ApplyPolicySpec(std::string_view spec, CompressionSettings* s) {
  const size_t slash = spec.find('/');
  if (slash != std::string_view::npos) {
    const std::string_view mode = spec.substr(slash + 1);
    spec = spec.substr(0, slash);
    if (mode == "prefill_end") {
      s->at = CompressAt::kPrefillEnd;
    } else if (mode == "chunk" || mode == "chunk:question") {
      s->at = CompressAt::kChunk;
      s->chunk_scoring = ChunkScoring::kQuestion;
    } else if (mode == "chunk:window") {
      s->at = CompressAt::kChunk;
      s->chunk_scoring = ChunkScoring::kWindow;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown compression mode '", std::string(mode), "' in '",
                                                     std::string(spec), "/", std::string(mode),
                                                     "' (expected prefill_end, chunk, chunk:question or chunk:window)"));
    }
  }
  const size_t at = spec.find('@');
  s->policy = std::string(spec.substr(0, at));
  if (at != std::string_view::npos) s->plan = std::string(spec.substr(at + 1));
  return absl::OkStatus();
}

absl::Status ValidateCompressionSettings(const CompressionSettings& s, int64_t n_layers) {
  if (!KnownPolicy(s.policy)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown KV policy '", s.policy, "' (expected one of ",
                                                   absl::StrJoin(KvPolicyNames(), ", "), ")"));
  }
  if (!(s.budget > 0) || !std::isfinite(s.budget)) {
    return absl::InvalidArgumentError(absl::StrCat("KV budget must be > 0 (a fraction <= 1 or a token count), got ",
                                                   s.budget));
  }
  if (s.budget > 1 && s.budget != std::floor(s.budget)) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV budget above 1 is a token count and must be a whole number, got ", s.budget));
  }
  if (!(s.auto_risk >= 0) || !std::isfinite(s.auto_risk)) {
    return absl::InvalidArgumentError(absl::StrCat("auto budget risk must be > 0 (auto:RISK), got ", s.auto_risk));
  }
  if (s.auto_risk > 0 && s.at != CompressAt::kPrefillEnd) {
    return absl::InvalidArgumentError(
        "KV budget auto:RISK needs compress_at prefill_end (the estimate needs the whole prompt), got chunk");
  }
  if (s.auto_risk > 0 && !s.layer_quota.empty()) {
    return absl::InvalidArgumentError("KV budget auto:RISK and explicit layer budgets exclude each other");
  }
  if (auto plan = ParseBudgetPlan(PlanOf(s)); !plan.ok()) return plan.status();
  if (PlanOf(s) == "ripple") {
    if (!s.ripple) {
      return absl::InvalidArgumentError(
          "KV budget plan ripple needs a RippleKV profile (start with --budget-plan ripple:PROFILE.json)");
    }
    if (n_layers > 0 && static_cast<int64_t>(s.ripple->sensitivity.size()) != n_layers) {
      return absl::InvalidArgumentError(absl::StrCat("the RippleKV profile has ", s.ripple->sensitivity.size(),
                                                     " layers, the model ", n_layers));
    }
  }
  if (!(s.ripple_params.r >= 1) || !std::isfinite(s.ripple_params.r)) {
    return absl::InvalidArgumentError(absl::StrCat("ripple r must be >= 1, got ", s.ripple_params.r));
  }
  if (!(s.ripple_params.gamma >= 1) || !std::isfinite(s.ripple_params.gamma)) {
    return absl::InvalidArgumentError(absl::StrCat("ripple gamma must be >= 1, got ", s.ripple_params.gamma));
  }
  if (s.policy == "pyramid" && PlanOf(s) != "pyramid") {
    return absl::InvalidArgumentError(absl::StrCat("KV policy pyramid needs budget plan pyramid, got '", s.plan, "'"));
  }
  if (!(s.first_stage_ratio > 0 && s.first_stage_ratio <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("first_stage_ratio must be in (0, 1], got ", s.first_stage_ratio));
  }
  if (s.window < 1 || s.window > kMaxScoringQueries) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV window must be in [1, ", kMaxScoringQueries, "] queries, got ", s.window));
  }
  if (s.question_tokens) {
    if (*s.question_tokens < 1 || *s.question_tokens > kMaxScoringQueries) {
      return absl::InvalidArgumentError(absl::StrCat("question_tokens must be in [1, ", kMaxScoringQueries,
                                                     "], got ", *s.question_tokens));
    }
    if (s.at != CompressAt::kChunk || s.chunk_scoring != ChunkScoring::kQuestion) {
      return absl::InvalidArgumentError(absl::StrCat(
          "question_tokens ", *s.question_tokens, " needs compress_at chunk with chunk_scoring question, got ",
          std::string(CompressAtName(s.at)), " with ", std::string(ChunkScoringName(s.chunk_scoring))));
    }
  }
  if (s.pool_kernel < 1 || s.pool_kernel % 2 == 0 || s.pool_kernel > 255) {
    return absl::InvalidArgumentError(absl::StrCat("pool kernel must be odd and in [1, 255], got ", s.pool_kernel));
  }
  if (s.reduce_protected_dims < 0 || s.reduce_protected_dims > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("reduce_protected_dims must be in [0, 4096] (0 = default), got ", s.reduce_protected_dims));
  }
  if (s.n_sink < 0) return absl::InvalidArgumentError(absl::StrCat("sink tokens must be >= 0, got ", s.n_sink));
  if (!s.layer_quota.empty()) {
    if (static_cast<int64_t>(s.layer_quota.size()) != n_layers) {
      return absl::InvalidArgumentError(absl::StrCat("layer_quota has ", s.layer_quota.size(),
                                                     " entries, the model has ", n_layers, " layers"));
    }
    for (size_t l = 0; l < s.layer_quota.size(); ++l) {
      if (s.layer_quota[l] < 1) {
        return absl::InvalidArgumentError(absl::StrCat("layer_quota[", l, "] must be >= 1, got ", s.layer_quota[l]));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<KvPolicy>> MakeKvPolicy(const CompressionSettings& s) {
  if (!KnownPolicy(s.policy)) return ValidateCompressionSettings(s, 0);
  if (s.policy == "full") return std::make_unique<FullPolicy>();
  if (s.policy == "streaming") return std::make_unique<StreamingLlmPolicy>(s.n_sink);
  if (IsMergeReducePolicy(s.policy)) {
    return std::make_unique<MergeReducePolicy>(s.policy, MakeReducer(s.policy.substr(12), ReduceProtectedDims(s)),
                                               s.reduce_seed, s.n_sink);
  }
  if (s.policy == "keydiff") return std::make_unique<KeyDiffPolicy>();
  if (s.policy == "criticalkv") {
    return std::make_unique<CriticalKvPolicy>(s.pool_kernel, s.first_stage_ratio);
  }
  return std::make_unique<SnapKvPolicy>(s.policy, s.pool_kernel);
}

std::vector<int64_t> QuotasFor(const CompressionSettings& s, int64_t n_layers, int64_t prompt_len, int64_t page_size) {
  if (!s.layer_quota.empty()) return s.layer_quota;
  const int64_t tokens = s.budget <= 1
      ? static_cast<int64_t>(std::floor(s.budget * static_cast<double>(prompt_len)))
      : static_cast<int64_t>(s.budget);
  const BudgetPlan plan = *ParseBudgetPlan(PlanOf(s));
  if (plan == BudgetPlan::kRipple && s.ripple) {
    return RippleQuotas(s.ripple->sensitivity, s.ripple_params, std::max<int64_t>(1, tokens), page_size);
  }
  return LayerQuotas(plan, n_layers, prompt_len, std::max<int64_t>(1, tokens), s.window);
}

}  // namespace kvserve
