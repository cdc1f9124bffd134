// `kvserve profile`: measures a model's per-layer RippleKV sensitivity on calibration text
// and writes the profile that --budget-plan ripple:PROFILE.json reads.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/budget/ripple_profile.h"
#include "engine/model/model_loader.h"
#include "engine/offline/ripple_profiler.h"
#include "engine/offline/ripple_validation.h"
#include "engine/offline/text_corpus.h"
#include "engine/tokenizer/tokenizer.h"
#include "server/flags/cli_args.h"
#include "server/flags/command_status.h"

namespace kvserve {
namespace {

int Fail(const absl::Status& st) { return ReportFailure("kvserve profile", st); }

// Consecutive windows of max_tokens tokens from each file, taken round-robin across the
// files (so a few samples already cover several texts), at most n in all.
absl::StatusOr<std::vector<std::vector<int32_t>>> CalibrationSamples(const Tokenizer& tok,
                                                                    const std::vector<std::string>& files,
                                                                    int64_t n, int64_t max_tokens) {
  std::vector<std::vector<int32_t>> per_file;
  for (const std::string& f : files) {
    std::ifstream in(f);
    if (!in) return absl::NotFoundError(absl::StrCat("--calibration file '", f, "' cannot be read"));
    std::stringstream text;
    text << in.rdbuf();
    per_file.push_back(tok.Encode(text.str(), tok.add_bos(), /*parse_special=*/false));
    if (static_cast<int64_t>(per_file.back().size()) < max_tokens) {
      return absl::InvalidArgumentError(absl::StrCat("--calibration file '", f, "' has ", per_file.back().size(),
                                                     " tokens, fewer than --max-tokens ", max_tokens));
    }
  }
  std::vector<std::vector<int32_t>> samples;
  for (int64_t k = 0; static_cast<int64_t>(samples.size()) < n; ++k) {
    bool any = false;
    for (const auto& t : per_file) {
      if ((k + 1) * max_tokens > static_cast<int64_t>(t.size()) || static_cast<int64_t>(samples.size()) >= n) continue;
      samples.emplace_back(t.begin() + k * max_tokens, t.begin() + (k + 1) * max_tokens);
      any = true;
    }
    if (!any) break;
  }
  return samples;
}

// --check: compresses one layer at a time, measures the damage on the eval corpus and
// prints its rank correlation with the profile and with the layer index.
int CheckProfile(const CliArgs& args, const Model& model, const Tokenizer& tokenizer, const std::string& path) {
  auto profile = LoadRippleProfileFor(path, model);
  if (!profile.ok()) return Fail(profile.status());
  LayerDamageOptions o;
  auto context = args.GetInt("context", o.context), samples = args.GetInt("samples", o.samples),
       budget = args.GetInt("layer-budget", o.layer_budget), seed = args.GetInt("seed", 0);
  for (const absl::Status& st : {context.status(), samples.status(), budget.status(), seed.status()}) {
    if (!st.ok()) return Fail(st);
  }
  o.context = *context;
  o.samples = *samples;
  o.layer_budget = *budget;
  o.seed = static_cast<uint64_t>(*seed);
  o.policy = args.Get("kv-policy").value_or(o.policy);
  auto corpus = TextCorpus::Load(args.Get("corpus").value_or(DefaultCorpusDir()), tokenizer);
  if (!corpus.ok()) return Fail(corpus.status());
  auto backend = MakeCpuBackend();
  const auto t0 = std::chrono::steady_clock::now();
  auto damage = MeasureLayerDamage(model, tokenizer, *backend, *corpus, o, [&](int64_t i) {
    std::fprintf(stderr, "check: sample %lld/%lld done\n", static_cast<long long>(i + 1),
                 static_cast<long long>(o.samples));
  });
  if (!damage.ok()) return Fail(damage.status());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<double> index(damage->size());
  for (size_t l = 0; l < index.size(); ++l) index[l] = static_cast<double>(l);
  std::printf("| layer | sensitivity s_l | damage: KL, only this layer at %lld tokens (%s) |\n|---|---|---|\n",
              static_cast<long long>(o.layer_budget), o.policy.c_str());
  for (size_t l = 0; l < damage->size(); ++l) {
    std::printf("| %zu | %.6g | %.6g |\n", l, (*profile)->sensitivity[l], (*damage)[l]);
  }
  std::printf("\nSpearman rho(sensitivity, damage) = %.3f\nSpearman rho(layer index, damage) = %.3f\n"
              "(%lld samples of %lld tokens, %.1f s)\n",
              SpearmanRho((*profile)->sensitivity, *damage), SpearmanRho(index, *damage),
              static_cast<long long>(o.samples), static_cast<long long>(o.context), seconds);
  return 0;
}

}  // namespace

int RunProfile(int argc, char** argv) {
  static const char kUsage[] =
                 "kvserve profile --model M --calibration FILE[,FILE...] (repeatable) --out PROFILE.json\n"
                 "  [--samples N=16] [--max-tokens T=1024] [--scored-tokens S=32]\n"
                 "  [--perturbation-scale X=0.5] [--seed S=0]\n"
                 "kvserve profile --model M --check PROFILE.json [--context 2048] [--samples 3]\n"
                 "  [--layer-budget 64] [--kv-policy snapkv] [--corpus DIR]: compress one layer at a time and\n"
                 "  rank-correlate the real damage with the profile\n";
  auto args = CliArgs::Parse(argc, argv,
                             {"model", "calibration", "out", "samples", "max-tokens", "scored-tokens",
                              "perturbation-scale", "seed", "check", "context", "layer-budget", "kv-policy|policy", "corpus"},
                             {}, kUsage);
  if (!args.ok()) return Fail(args.status());
  if (args->help()) return 0;
  auto spec = args->Get("model");
  auto out = args->Get("out");
  if (!spec) return Fail(absl::InvalidArgumentError("--model is required"));
  if (auto check = args->Get("check")) {
    auto model = LoadModel(*spec);
    if (!model.ok()) return Fail(model.status());
    auto tokenizer = Tokenizer::Create(model->tokenizer);
    if (!tokenizer.ok()) return Fail(tokenizer.status());
    return CheckProfile(*args, *model, *tokenizer, *check);
  }
  if (!out) return Fail(absl::InvalidArgumentError("--out is required"));
  std::vector<std::string> files;
  for (const std::string& v : args->GetAll("calibration")) {
    for (absl::string_view f : absl::StrSplit(v, ',', absl::SkipEmpty())) files.emplace_back(f);
  }
  if (files.empty()) return Fail(absl::InvalidArgumentError("--calibration needs at least one text file"));
  auto samples = args->GetInt("samples", 16), max_tokens = args->GetInt("max-tokens", 1024),
       scored = args->GetInt("scored-tokens", 32), seed = args->GetInt("seed", 0);
  auto scale = args->GetDouble("perturbation-scale", 0.5);
  for (const absl::Status& st : {samples.status(), max_tokens.status(), scored.status(), seed.status(), scale.status()}) {
    if (!st.ok()) return Fail(st);
  }
  if (*samples < 1) return Fail(absl::InvalidArgumentError(absl::StrCat("--samples must be >= 1, got ", *samples)));
  if (*scored < 1 || *scored >= *max_tokens) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--scored-tokens must be in [1, --max-tokens), got ", *scored, " with --max-tokens ", *max_tokens)));
  }
  auto model = LoadModel(*spec);
  if (!model.ok()) return Fail(model.status());
  auto tokenizer = Tokenizer::Create(model->tokenizer);
  if (!tokenizer.ok()) return Fail(tokenizer.status());
  if (*max_tokens > model->config.max_context) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--max-tokens ", *max_tokens,
                                                               " exceeds the model's context ",
                                                               model->config.max_context)));
  }
  auto cal = CalibrationSamples(*tokenizer, files, *samples, *max_tokens);
  if (!cal.ok()) return Fail(cal.status());

  ProfilerOptions o;
  o.scored_tokens = *scored;
  o.perturbation_scale = *scale;
  o.seed = static_cast<uint64_t>(*seed);
  auto backend = MakeCpuBackend();
  const auto t0 = std::chrono::steady_clock::now();
  auto s = MeasureLayerSensitivity(*model, *backend, *cal, o, [&](int64_t i) {
    std::fprintf(stderr, "profile: sample %lld/%zu done\n", static_cast<long long>(i + 1), cal->size());
  });
  if (!s.ok()) return Fail(s.status());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const ModelConfig& c = model->config;
  RippleProfile p;
  p.architecture = c.architecture;
  p.n_layers = c.n_layers;
  p.n_heads = c.n_heads;
  p.n_kv_heads = c.n_kv_heads;
  p.head_dim = c.head_dim;
  p.fingerprint = ModelFingerprint(*model);
  p.calibration_files = files;
  p.samples = static_cast<int64_t>(cal->size());
  p.max_tokens = *max_tokens;
  p.scored_tokens = *scored;
  p.perturbation_scale = *scale;
  p.seed = static_cast<uint64_t>(*seed);
  p.seconds = seconds;
  p.sensitivity = *s;
  if (absl::Status st = SaveRippleProfile(p, *out); !st.ok()) return Fail(st);
  std::printf("layer sensitivity (mean KL over %zu samples, %.1f s):\n", cal->size(), seconds);
  for (size_t l = 0; l < s->size(); ++l) std::printf("  %2zu  %.6g\n", l, (*s)[l]);
  std::printf("wrote %s\n", out->c_str());
  return 0;
}

}  // namespace kvserve
