// The --kv-* flags into CompressionSettings, with errors that name flag and value.
#include "server/serve/kv_flags.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/compress/auto_budget.h"

namespace kvserve {

const std::vector<std::string>& KvFlagNames() {
  static const std::vector<std::string> names = {"kv-policy",   "kv-budget",         "budget-plan", "compress-at",
                                                 "kv-window",   "first-stage-ratio", "pool-kernel", "sink-tokens",
                                                 "ripple-r",    "ripple-gamma",      "reduce-protected-dims",
                                                 "kv-dtype",    "chunk-scoring",     "question-tokens"};
  return names;
}

const char* KvFlagsHelp() {
  return "  [--kv-policy full|streaming|snapkv|criticalkv|pyramid|mergereduce:random|mergereduce:cluster=full]\n"
         "  [--kv-budget F|N|auto:RISK=0.2]"
         "  (fraction <= 1 of the prompt, tokens per layer, or picked per request from the prompt's\n"
         "  estimated risk, with prefill_end) [--budget-plan uniform|pyramid|ripple:PROFILE.json]\n"
         "  [--ripple-r R=8] [--ripple-gamma G=4] [--compress-at prefill_end|chunk=prefill_end]\n"
         "  [--chunk-scoring question|window=question] (chunk mode: score each chunk with the question's\n"
         "  queries or the chunk's own) [--question-tokens N (the prompt's last N tokens; default the window)]\n"
         "  [--kv-window N=64] [--first-stage-ratio R=0.5] [--pool-kernel K=5] [--sink-tokens N=4]\n"
         "  [--reduce-protected-dims M=128 (mergereduce:cluster, capped at head_dim)]\n"
         "  [--kv-dtype f32|f16=f32] (K/V storage; f16 halves KV memory, CPU backend only)\n";
}

absl::StatusOr<DType> KvDTypeFromArgs(const CliArgs& a) {
  const std::string text = a.Get("kv-dtype").value_or("f32");
  if (text == "f32") return DType::kF32;
  if (text == "f16") return DType::kF16;
  return absl::InvalidArgumentError(absl::StrCat("--kv-dtype must be f32 or f16, got '", text, "'"));
}

absl::StatusOr<CompressionSettings> CompressionFromArgs(const CliArgs& a, const Model& model) {
  CompressionSettings s;
  if (auto p = a.Get("kv-policy")) s.policy = *p;
  if (auto p = a.Get("budget-plan")) {
    if (absl::StartsWith(*p, "ripple:")) {
      auto profile = LoadRippleProfileFor(p->substr(7), model);
      if (!profile.ok()) return profile.status();
      s.ripple = *std::move(profile);
      s.plan = "ripple";
    } else if (*p == "ripple") {
      return absl::InvalidArgumentError("--budget-plan ripple needs a profile: --budget-plan ripple:PROFILE.json");
    } else {
      s.plan = *p;
    }
  }
  if (auto p = a.Get("compress-at")) {
    absl::StatusOr<CompressAt> at = ParseCompressAt(*p);
    if (!at.ok()) return absl::InvalidArgumentError(absl::StrCat("--compress-at: ", at.status().message()));
    s.at = *at;
  }
  if (auto p = a.Get("chunk-scoring")) {
    absl::StatusOr<ChunkScoring> scoring = ParseChunkScoring(*p);
    if (!scoring.ok()) return absl::InvalidArgumentError(absl::StrCat("--chunk-scoring: ", scoring.status().message()));
    s.chunk_scoring = *scoring;
  }
  if (a.Get("question-tokens")) {
    absl::StatusOr<int64_t> n = a.GetInt("question-tokens", 0);
    if (!n.ok()) return n.status();
    s.question_tokens = *n;
  }
  // --kv-budget auto:RISK picks the budget per request (auto_budget.h); a number fixes it.
  const std::optional<std::string> budget_text = a.Get("kv-budget");
  const bool auto_budget = budget_text && absl::StartsWith(*budget_text, "auto");
  if (auto_budget) {
    absl::StatusOr<double> risk = ParseAutoBudget(*budget_text);
    if (!risk.ok()) return absl::InvalidArgumentError(absl::StrCat("--kv-budget: ", risk.status().message()));
    s.auto_risk = *risk;
  }
  absl::StatusOr<double> budget = auto_budget ? absl::StatusOr<double>(s.budget) : a.GetDouble("kv-budget", s.budget),
                         ratio = a.GetDouble("first-stage-ratio", s.first_stage_ratio),
                         r = a.GetDouble("ripple-r", s.ripple_params.r),
                         gamma = a.GetDouble("ripple-gamma", s.ripple_params.gamma);
  absl::StatusOr<int64_t> window = a.GetInt("kv-window", s.window), kernel = a.GetInt("pool-kernel", s.pool_kernel),
                          sinks = a.GetInt("sink-tokens", s.n_sink),
                          protected_dims = a.GetInt("reduce-protected-dims", s.reduce_protected_dims);
  for (const absl::Status& st : {budget.status(), ratio.status(), r.status(), gamma.status(), window.status(),
                                 kernel.status(), sinks.status(), protected_dims.status()}) {
    if (!st.ok()) return st;
  }
  s.budget = *budget;
  s.first_stage_ratio = *ratio;
  s.ripple_params = {*r, *gamma};
  s.window = *window;
  s.pool_kernel = *kernel;
  s.n_sink = *sinks;
  s.reduce_protected_dims = *protected_dims;
  if (absl::Status st = ValidateCompressionSettings(s, model.config.n_layers); !st.ok()) return st;
  return s;
}

}  // namespace kvserve
