// KvSettings: the knob table (each knob's name per source), the name parsers, the one check
// of the values, and the resolution over defaults.
#include "engine/compress/kv_settings.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kvserve {

namespace {
constexpr double kMaxBudgetTokens = 1 << 30;  // --max-context's own upper bound
}  // namespace
namespace {

// Each knob as the engine, the GenerateRequest (proto/kvserve/v1/generation.proto) and the
// command line (server/serve/kv_flags.cc) spell it. A knob a source lacks repeats the engine's.
struct KnobNames {
  std::string_view knob, engine, proto, flag;
};
constexpr KnobNames kKnobs[] = {
    {"policy", "KV policy", "kv.policy", "--kv-policy"},
    {"budget", "KV budget", "kv.budget", "--kv-budget"},
    {"auto_risk", "KV budget auto:RISK", "kv.budget_auto_risk", "--kv-budget auto:RISK"},
    {"plan", "KV budget plan", "kv.budget_plan", "--budget-plan"},
    {"layer_quota", "layer_quota", "kv.layer_budgets", "layer_quota"},
    {"compress_at", "compress_at", "kv.compress_at", "--compress-at"},
    {"chunk_scoring", "chunk_scoring", "kv.chunk_scoring", "--chunk-scoring"},
    {"question_tokens", "question_tokens", "kv.question_tokens", "--question-tokens"},
    {"chunk_headroom", "chunk_headroom", "kv.chunk_headroom", "--chunk-headroom"},
    {"evicted_weight", "evicted_weight", "kv.evicted_weight", "--evicted-weight"},
    {"first_stage_ratio", "first_stage_ratio", "kv.first_stage_ratio", "--first-stage-ratio"},
    {"window", "KV window", "kv.window", "--kv-window"},
    {"pool_kernel", "pool kernel", "kv.pool_kernel", "--pool-kernel"},
    {"reduce_protected_dims", "reduce_protected_dims", "kv.reduce_protected_dims", "--reduce-protected-dims"},
    {"sink_tokens", "sink tokens", "kv.sink_tokens", "--sink-tokens"},
    {"ripple_r", "ripple r", "ripple r", "--ripple-r"},
    {"ripple_gamma", "ripple gamma", "ripple gamma", "--ripple-gamma"},
};

// StrCat's pieces: this abseil's string_view is not std::string_view, so those become strings.
template <typename T>
decltype(auto) Piece(const T& v) {
  if constexpr (std::is_same_v<T, std::string_view>) {
    return std::string(v);
  } else {
    return (v);
  }
}

absl::Status Bad(const auto&... parts) { return absl::InvalidArgumentError(absl::StrCat(Piece(parts)...)); }

std::string JoinNames(const auto& names) {
  return absl::StrJoin(names, ", ", [](std::string* out, std::string_view n) { out->append(n); });
}

// name among names, or INVALID_ARGUMENT naming the knob and listing the names.
template <typename Names>
absl::StatusOr<size_t> Lookup(const Names& names, std::string_view name, std::string_view knob, KvSource source) {
  for (size_t i = 0; i < std::size(names); ++i) {
    if (name == names[i]) return i;
  }
  return Bad(KvKnobName(knob, source), " '", name, "' is unknown; use one of ", JoinNames(names));
}

}  // namespace

std::string_view KvKnobName(std::string_view knob, KvSource source) {
  for (const KnobNames& k : kKnobs) {
    if (k.knob != knob) continue;
    switch (source) {
      case KvSource::kProto: return k.proto;
      case KvSource::kFlags: return k.flag;
      case KvSource::kEngine: return k.engine;
    }
  }
  return knob;
}

absl::StatusOr<std::string> ParseKvPolicy(std::string_view name, KvSource source) {
  absl::StatusOr<size_t> i = Lookup(KvPolicyNames(), name, "policy", source);
  if (!i.ok()) return i.status();
  return KvPolicyNames()[*i];
}

absl::StatusOr<BudgetPlan> ParseKvBudgetPlan(std::string_view name, KvSource source) {
  absl::StatusOr<size_t> i = Lookup(BudgetPlanNames(), name, "plan", source);
  if (!i.ok()) return i.status();
  return static_cast<BudgetPlan>(*i);
}

absl::StatusOr<CompressAt> ParseCompressAt(std::string_view name, KvSource source) {
  absl::StatusOr<size_t> i = Lookup(CompressAtNames(), name, "compress_at", source);
  if (!i.ok()) return i.status();
  return static_cast<CompressAt>(*i);
}

absl::StatusOr<ChunkScoring> ParseChunkScoring(std::string_view name, KvSource source) {
  absl::StatusOr<size_t> i = Lookup(ChunkScoringNames(), name, "chunk_scoring", source);
  if (!i.ok()) return i.status();
  return static_cast<ChunkScoring>(*i);
}

absl::StatusOr<EvictedWeight> ParseEvictedWeight(std::string_view name, KvSource source) {
  absl::StatusOr<size_t> i = Lookup(EvictedWeightNames(), name, "evicted_weight", source);
  if (!i.ok()) return i.status();
  return static_cast<EvictedWeight>(*i);
}

absl::StatusOr<KvSettings> ParsePolicySpec(std::string_view spec) {
  KvSettings kv;
  if (const size_t plus = spec.rfind('+'); plus != std::string_view::npos) {
    absl::StatusOr<EvictedWeight> evicted = ParseEvictedWeight(spec.substr(plus + 1));
    if (!evicted.ok()) {
      return Bad("unknown evicted weight '", spec.substr(plus + 1), "' in '", spec, "' (expected +",
                 JoinNames(EvictedWeightNames()), ")");
    }
    kv.evicted_weight = *evicted;
    spec = spec.substr(0, plus);
  }
  const size_t slash = spec.find('/');
  if (slash != std::string_view::npos) {
    const std::string_view mode = spec.substr(slash + 1);
    if (mode == "prefill_end") {
      kv.compress_at = CompressAt::kPrefillEnd;
    } else if (mode == "chunk" || mode == "chunk:question") {
      kv.compress_at = CompressAt::kChunk;
      kv.chunk_scoring = ChunkScoring::kQuestion;
    } else if (mode == "chunk:window") {
      kv.compress_at = CompressAt::kChunk;
      kv.chunk_scoring = ChunkScoring::kWindow;
    } else if (mode == "chunk:question_at_end") {
      kv.compress_at = CompressAt::kChunk;
      kv.chunk_scoring = ChunkScoring::kQuestionAtEnd;
    } else {
      return Bad("unknown compression mode '", mode, "' in '", spec,
                 "' (expected prefill_end, chunk, chunk:question, chunk:question_at_end or chunk:window)");
    }
    spec = spec.substr(0, slash);
  }
  const size_t at = spec.find('@');
  absl::StatusOr<std::string> policy = ParseKvPolicy(spec.substr(0, at));
  if (!policy.ok()) return policy.status();
  kv.policy = *std::move(policy);
  if (at != std::string_view::npos) {
    absl::StatusOr<BudgetPlan> plan = ParseKvBudgetPlan(spec.substr(at + 1));
    if (!plan.ok()) return plan.status();
    kv.plan = *plan;
  }
  return kv;
}

absl::Status ValidateKvSettings(const KvSettings& kv, KvSource source, int64_t n_layers) {
  auto name = [source](std::string_view knob) { return KvKnobName(knob, source); };
  if (kv.policy) {
    if (absl::StatusOr<std::string> p = ParseKvPolicy(*kv.policy, source); !p.ok()) return p.status();
  }
  if (kv.budget) {
    const double b = *kv.budget;
    if (!(std::isfinite(b) && b > 0)) return Bad(name("budget"), " must be > 0, got ", b);
    if (b > 1 && b != std::floor(b)) {
      return Bad(name("budget"), " above 1 counts tokens and must be a whole number, got ", b);
    }
    // Token counts become int64 downstream; past any context a budget only means "keep all".
    if (b > kMaxBudgetTokens) {
      return Bad(name("budget"), " counts at most ", static_cast<int64_t>(kMaxBudgetTokens), " tokens, got ", b);
    }
  }
  if (kv.auto_risk) {
    const double r = *kv.auto_risk;
    if (!(std::isfinite(r) && r > 0)) return Bad(name("auto_risk"), " must be > 0, got ", r);
    if (kv.budget) return Bad(name("budget"), " and ", name("auto_risk"), " exclude each other; set one");
    if (kv.layer_quota) return Bad(name("layer_quota"), " and ", name("auto_risk"), " exclude each other; set one");
    if (kv.compress_at == CompressAt::kChunk) {
      return Bad(name("auto_risk"), " needs ", name("compress_at"),
                 " prefill_end (the estimate needs the whole prompt), got chunk");
    }
  }
  if (kv.layer_quota) {
    const std::vector<int64_t>& q = *kv.layer_quota;
    if (n_layers > 0 && static_cast<int64_t>(q.size()) != n_layers) {
      return Bad(name("layer_quota"), " has ", q.size(), " entries, the model has ", n_layers, " layers");
    }
    for (size_t l = 0; l < q.size(); ++l) {
      if (q[l] < 1) return Bad(name("layer_quota"), "[", l, "] must be >= 1, got ", q[l]);
      if (q[l] > static_cast<int64_t>(kMaxBudgetTokens)) {
        return Bad(name("layer_quota"), "[", l, "] counts at most ", static_cast<int64_t>(kMaxBudgetTokens),
                   " tokens, got ", q[l]);
      }
    }
  }
  if (kv.question_tokens) {
    const int64_t n = *kv.question_tokens;
    if (n < 1 || n > kMaxScoringQueries) {
      return Bad(name("question_tokens"), " must be in [1, ", kMaxScoringQueries, "], got ", n);
    }
    if (kv.compress_at == CompressAt::kPrefillEnd) {
      return Bad(name("question_tokens"), " ", n, " needs ", name("compress_at"),
                 " chunk (prefill_end scores with the window), got prefill_end");
    }
    if (kv.chunk_scoring == ChunkScoring::kWindow) {
      return Bad(name("question_tokens"), " ", n, " needs ", name("chunk_scoring"), " question, got window");
    }
  }
  if (kv.chunk_headroom) {
    const int64_t n = *kv.chunk_headroom;
    if (n < 0 || n > static_cast<int64_t>(kMaxBudgetTokens)) {
      return Bad(name("chunk_headroom"), " must be in [0, ", static_cast<int64_t>(kMaxBudgetTokens), "] tokens, got ", n);
    }
    if (kv.compress_at == CompressAt::kPrefillEnd) {
      return Bad(name("chunk_headroom"), " ", n, " needs ", name("compress_at"),
                 " chunk (prefill_end compresses once), got prefill_end");
    }
  }
  if (kv.evicted_weight && *kv.evicted_weight != EvictedWeight::kDrop && kv.policy && IsMergeReducePolicy(*kv.policy)) {
    return Bad(name("evicted_weight"), " ", EvictedWeightName(*kv.evicted_weight), " applies to the scoring policies; ",
               name("policy"), " ", *kv.policy, " weights its own entries");
  }
  if (kv.first_stage_ratio && !(*kv.first_stage_ratio > 0 && *kv.first_stage_ratio <= 1)) {
    return Bad(name("first_stage_ratio"), " must be in (0, 1], got ", *kv.first_stage_ratio);
  }
  if (kv.window && (*kv.window < 1 || *kv.window > kMaxScoringQueries)) {
    return Bad(name("window"), " must be in [1, ", kMaxScoringQueries, "], got ", *kv.window);
  }
  if (kv.pool_kernel && (*kv.pool_kernel < 1 || *kv.pool_kernel % 2 == 0 || *kv.pool_kernel > 255)) {
    return Bad(name("pool_kernel"), " must be odd and in [1, 255], got ", *kv.pool_kernel);
  }
  if (kv.reduce_protected_dims && (*kv.reduce_protected_dims < 1 || *kv.reduce_protected_dims > 4096)) {
    return Bad(name("reduce_protected_dims"), " must be in [1, 4096], got ", *kv.reduce_protected_dims);
  }
  if (kv.sink_tokens && (*kv.sink_tokens < 0 || *kv.sink_tokens > kMaxBudgetTokens)) {
    return Bad(name("sink_tokens"), " must be in [0, ", static_cast<int64_t>(kMaxBudgetTokens), "], got ",
               *kv.sink_tokens);
  }
  if (kv.ripple_r && !(*kv.ripple_r >= 1 && std::isfinite(*kv.ripple_r))) {
    return Bad(name("ripple_r"), " must be >= 1, got ", *kv.ripple_r);
  }
  if (kv.ripple_gamma && !(*kv.ripple_gamma >= 1 && std::isfinite(*kv.ripple_gamma))) {
    return Bad(name("ripple_gamma"), " must be >= 1, got ", *kv.ripple_gamma);
  }
  if (kv.ripple_profile && n_layers > 0 && static_cast<int64_t>(kv.ripple_profile->sensitivity.size()) != n_layers) {
    return Bad("the RippleKV profile has ", kv.ripple_profile->sensitivity.size(), " layers, the model ", n_layers);
  }
  return absl::OkStatus();
}

CompressionSettings ResolveKvSettings(const KvSettings& kv, const CompressionSettings& defaults,
                                      int64_t chat_question_tokens) {
  CompressionSettings s = defaults;
  if (kv.policy) s.policy = *kv.policy;
  // A budget replaces the defaults' budget, fixed or auto.
  if (kv.budget) {
    s.budget = *kv.budget;
    s.auto_risk = 0;
  }
  if (kv.auto_risk) s.auto_risk = *kv.auto_risk;
  if (kv.plan) s.plan = kv.plan;
  if (kv.layer_quota) s.layer_quota = *kv.layer_quota;
  if (kv.compress_at) s.at = *kv.compress_at;
  if (kv.chunk_scoring) s.chunk_scoring = *kv.chunk_scoring;
  if (kv.question_tokens) s.question_tokens = kv.question_tokens;
  if (kv.chunk_headroom) s.chunk_headroom = *kv.chunk_headroom;
  if (kv.evicted_weight) s.evicted_weight = kv.evicted_weight;
  if (kv.first_stage_ratio) s.first_stage_ratio = *kv.first_stage_ratio;
  if (kv.window) s.window = s.recent_window = *kv.window;
  if (kv.pool_kernel) s.pool_kernel = *kv.pool_kernel;
  if (kv.reduce_protected_dims) s.reduce_protected_dims = *kv.reduce_protected_dims;
  if (kv.sink_tokens) s.n_sink = *kv.sink_tokens;
  if (kv.ripple_r) s.ripple_params.r = *kv.ripple_r;
  if (kv.ripple_gamma) s.ripple_params.gamma = *kv.ripple_gamma;
  if (kv.ripple_profile) s.ripple = kv.ripple_profile;
  if (!s.question_tokens && s.at == CompressAt::kChunk && ProbesWithQuestion(s.chunk_scoring) &&
      chat_question_tokens > 0 && chat_question_tokens <= kMaxChatQuestionTokens) {
    s.question_tokens = chat_question_tokens;
  }
  return s;
}

}  // namespace kvserve
