// `kvserve eval`: KV compression quality as one table of policy x budget x task@context
// (mean KL on natural text, passkey and multikey retrieval accuracy). See docs/QUALITY.md.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/budget/ripple_profile.h"
#include "engine/model/model_loader.h"
#include "engine/offline/eval_runner.h"
#include "engine/tokenizer/chat_template.h"
#include "kernels/backend.h"
#include "nlohmann/json.hpp"
#include "server/flags/cli_args.h"
#include "server/flags/command_status.h"
#include "server/serve/kv_flags.h"

namespace kvserve {
namespace {

int Fail(const absl::Status& st) { return ReportFailure("kvserve eval", st); }

absl::Status FlagError(const std::string& flag, const std::string& value, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, " '", value, "': ", why));
}

// The comma-separated values of a list flag, or def when it is absent.
absl::StatusOr<std::vector<std::string>> ListFlag(const CliArgs& a, const std::string& flag, const std::string& def) {
  const std::string raw = a.Get(flag).value_or(def);
  std::vector<std::string> items = absl::StrSplit(raw, ',', absl::SkipWhitespace());
  if (items.empty()) return FlagError(flag, raw, "needs at least one value");
  return items;
}

absl::StatusOr<EvalPlan> PlanFromArgs(const CliArgs& a, const Model& model) {
  EvalPlan plan;
  // The shared KV flags (kv_flags.h) apply to every row; policy and budget come from the lists.
  absl::StatusOr<KvSettings> kv = KvSettingsFromArgs(a, model);
  if (!kv.ok()) return kv.status();
  // Rows named policy@ripple use this profile (refused when made for another model).
  if (auto path = a.Get("ripple-profile")) {
    auto profile = LoadRippleProfileFor(*path, model);
    if (!profile.ok()) return profile.status();
    kv->ripple_profile = *std::move(profile);
  }
  plan.base = ResolveKvSettings(*kv, CompressionSettings{});

  auto policies = ListFlag(a, "policies", "full,streaming,snapkv,pyramid,criticalkv");
  if (!policies.ok()) return policies.status();
  for (const std::string& p : *policies) {
    absl::StatusOr<KvSettings> row = ParsePolicySpec(p);
    absl::Status st = row.status();
    if (st.ok()) st = ValidateCompressionSettings(ResolveKvSettings(*row, plan.base), model.config.n_layers);
    if (!st.ok()) return FlagError("policies", p, std::string(st.message()));
    plan.policies.push_back(p);
  }
  auto budgets = ListFlag(a, "budgets", "0.1,0.2,0.3");
  if (!budgets.ok()) return budgets.status();
  for (const std::string& b : *budgets) {
    double v;
    if (!absl::SimpleAtod(b, &v) || !(v > 0 && v <= 1)) {
      return FlagError("budgets", b, "a budget is the fraction of the context kept, in (0, 1]");
    }
    plan.budgets.push_back(v);
  }
  if (a.Get("auto-risks")) {
    auto risks = ListFlag(a, "auto-risks", "");
    if (!risks.ok()) return risks.status();
    for (const std::string& r : *risks) {
      double v;
      if (!absl::SimpleAtod(r, &v) || !(v > 0) || !std::isfinite(v)) {
        return FlagError("auto-risks", r, "an auto:RISK budget needs RISK > 0");
      }
      if (plan.base.at != CompressAt::kPrefillEnd) {
        return FlagError("auto-risks", r, "auto:RISK budgets need --compress-at prefill_end");
      }
      plan.auto_risks.push_back(v);
    }
  }
  auto tasks = ListFlag(a, "tasks", "kl,passkey,multikey");
  if (!tasks.ok()) return tasks.status();
  for (const std::string& t : *tasks) {
    absl::StatusOr<EvalTask> task = ParseEvalTask(t);
    if (!task.ok()) return FlagError("tasks", t, std::string(task.status().message()));
    plan.tasks.push_back(*task);
  }
  absl::StatusOr<int64_t> samples = a.GetInt("samples", 3), continuation = a.GetInt("continuation", 64),
                          answer = a.GetInt("answer-tokens", 12), seed = a.GetInt("seed", 0),
                          page = a.GetInt("page-size", 16), chunk = a.GetInt("prefill-chunk", 512);
  for (const absl::Status& st : {samples.status(), continuation.status(), answer.status(), seed.status(),
                                 page.status(), chunk.status()}) {
    if (!st.ok()) return st;
  }
  const std::pair<const char*, int64_t> positive[] = {{"samples", *samples}, {"continuation", *continuation},
                                                      {"answer-tokens", *answer}, {"page-size", *page},
                                                      {"prefill-chunk", *chunk}};
  for (const auto& [flag, v] : positive) {
    if (v < 1) return FlagError(flag, std::to_string(v), "must be >= 1");
  }
  plan.samples = *samples;
  if (std::optional<std::string> range = a.Get("sample-range")) {
    const std::vector<std::string> ends = absl::StrSplit(*range, ':');
    int64_t first = 0, end = 0;
    if (ends.size() != 2 || !absl::SimpleAtoi(ends[0], &first) || !absl::SimpleAtoi(ends[1], &end) || first < 0 ||
        end <= first || end > plan.samples) {
      return FlagError("sample-range", *range, absl::StrCat("must be I:J with 0 <= I < J <= --samples ", plan.samples));
    }
    plan.first_sample = first;
    plan.end_sample = end;
  }
  plan.continuation = *continuation;
  plan.answer_tokens = *answer;
  plan.seed = static_cast<uint64_t>(*seed);
  plan.page_size = *page;
  plan.prefill_chunk = *chunk;

  auto contexts = ListFlag(a, "contexts", "2048,4096,7500");
  if (!contexts.ok()) return contexts.status();
  const int64_t after = std::max(plan.continuation, plan.answer_tokens);
  for (const std::string& c : *contexts) {
    int64_t v;
    if (!absl::SimpleAtoi(c, &v) || v < 1) return FlagError("contexts", c, "a context is a token count >= 1");
    if (v + after > model.config.max_context) {
      return FlagError("contexts", c,
                       absl::StrCat("with ", after, " tokens after it, it exceeds the model's context of ",
                                    model.config.max_context, " tokens"));
    }
    plan.contexts.push_back(v);
  }

  // Plain text by default: with the full cache SmolLM2 answered more of the retrieval
  // questions that way than inside its chat template (docs/QUALITY.md).
  const bool has_chat = DetectChatTemplate(model.tokenizer.chat_template).ok();
  const std::string style = a.Get("prompt-style").value_or("plain");
  absl::StatusOr<PromptStyle> parsed = ParsePromptStyle(style);
  if (!parsed.ok()) return FlagError("prompt-style", style, std::string(parsed.status().message()));
  if (*parsed == PromptStyle::kChat && !has_chat) {
    return FlagError("prompt-style", style, "the model has no chat template kvserve renders");
  }
  plan.style = *parsed;
  return plan;
}

const char* kEvalHelp =
    "kvserve eval --model PATH|random:PRESET\n"
    "  [--policies full,streaming,snapkv,pyramid,criticalkv] (also mergereduce:random|cluster; POLICY@PLAN\n"
    "  picks a budget plan per row: snapkv@ripple, criticalkv@pyramid; POLICY/MODE when it compresses:\n"
    "  snapkv/prefill_end, snapkv/chunk (question scoring), snapkv/chunk:window, keydiff/chunk; a last +merge\n"
    "  merges each evicted entry's weight into the kept entry with the nearest key: snapkv/chunk+merge, +merge-near\n"
    "  only into a like key, +merge-values as +merge-near and each kept value the weighted mean of those merged\n"
    "  into it, +merge-mid as +merge-near at mid-prompt cuts and drop at the prompt's end; without one a row\n"
    "  drops it, though serve's chunk mode merges near keys mid-prompt by default)\n"
    "  [--ripple-profile PROFILE.json --ripple-r 8 --ripple-gamma 4]\n"
    "  [--budgets 0.1,0.2,0.3 (fractions of the context)] [--auto-risks 0.1,0.2 (auto:RISK rows; the\n"
    "  cells then show the budget the risk picked, as a share of the context, in parentheses)]\n"
    "  [--contexts 2048,4096,7500 (tokens)] [--tasks kl,passkey,multikey (also multivalue, vartrack)] [--samples N=3]\n"
    "  [--sample-range I:J (run samples I..J-1 only: the same samples a whole run of N draws)]\n"
    "  [--continuation N=64 (kl tokens after the context)] [--answer-tokens N=12 (greedy answer length)]\n"
    "  [--corpus DIR=tests/data/corpus] [--seed S=0] [--prompt-style plain|chat=plain]\n"
    "  [--page-size N=16] [--prefill-chunk N=512] [--kv-window N=16] [--first-stage-ratio R=0.5]\n"
    "  [--pool-kernel K=31] [--sink-tokens N (4 streaming/merge-reduce, 0 others)] [--reduce-protected-dims N=128]\n"
    "  [--compress-at prefill_end|chunk=prefill_end] [--chunk-headroom N=0 (chunk rows: entries above the budget\n"
    "  during the prompt; below --prefill-chunk: back to the budget after every chunk)]\n"
    "  [--verbose (a line per configuration: its answer, and the share of layer-heads still holding the needle)]\n"
    "  [--json FILE (every cell with its samples, interval, answer NLL (gap), needle held and KV peak)]\n"
    "  [--no-full-reference (chunk-mode retrieval rows only: skip the full-cache prefill, so no NLL gaps;\n"
    "  two rows' answer NLLs still pair sample by sample)]\n"
    "Each context is prefilled once with the full cache (not with --no-full-reference); with prefill_end each\n"
    "policy x budget compresses a copy at the end of the prompt, with chunk it prefills again, compressing\n"
    "after every chunk.\n"
    "Progress goes to stderr, the markdown table and the wall time to stdout.\n";

}  // namespace

int RunEval(int argc, char** argv) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const std::vector<std::string> value_flags = {
      "model",        "policies", "budgets", "contexts",     "tasks",     "samples", "sample-range", "continuation",
      "answer-tokens", "corpus",  "seed",    "prompt-style", "page-size", "prefill-chunk", "kv-window",
      "first-stage-ratio", "pool-kernel", "sink-tokens", "ripple-profile", "ripple-r", "ripple-gamma",
      "compress-at", "chunk-headroom", "reduce-protected-dims", "auto-risks", "json"};
  KV_ASSIGN_OR_FAIL(args, CliArgs::Parse(argc, argv, value_flags, {"verbose", "no-full-reference"}, kEvalHelp));
  if (args.help()) return 0;
  auto model_spec = args.Get("model");
  if (!model_spec) return Fail(absl::InvalidArgumentError("--model is required"));
  KV_ASSIGN_OR_FAIL(model, LoadModel(*model_spec));
  KV_ASSIGN_OR_FAIL(tokenizer, Tokenizer::Create(model.tokenizer));
  KV_ASSIGN_OR_FAIL(plan, PlanFromArgs(args, model));
  plan.verbose = args.Flag("verbose");
  plan.full_reference = !args.Flag("no-full-reference");
  std::unique_ptr<TextCorpus> corpus;
  if (std::find(plan.tasks.begin(), plan.tasks.end(), EvalTask::kKl) != plan.tasks.end()) {
    const std::string dir = args.Get("corpus").value_or(DefaultCorpusDir());
    KV_ASSIGN_OR_FAIL(loaded, TextCorpus::Load(dir, tokenizer));
    corpus = std::make_unique<TextCorpus>(std::move(loaded));
  }
  auto backend = MakeCpuBackend();
  // The kernels' ISA changes the numbers, not only the speed: the AVX2 and AVX-512 tables (and
  // OpenBLAS's sgemm, chosen per CPU) sum in different orders, and over an 8K prompt the
  // rounding moves the full cache's answer NLL by up to 0.34 nats (sd 0.13; docs/QUALITY.md,
  // forty-second section). Recorded so that a run without the full cache takes its NLL gaps
  // only from a full cache run on the same kernels (scripts/quality_headline.py).
  const std::string cpu_isa(CpuKernelIsa());
  std::fprintf(stderr,
               "kvserve eval: %s, %zu rows x %zu columns, %lld samples each, %s prompts, seed %llu%s, %s kernels\n",
               model_spec->c_str(), EvalRows(plan).size(), plan.tasks.size() * plan.contexts.size(),
               static_cast<long long>(plan.samples), std::string(PromptStyleName(plan.style)).c_str(),
               static_cast<unsigned long long>(plan.seed), plan.seed != 0 ? " hashed" : "", cpu_isa.c_str());
  const std::optional<std::string> json_path = args.Get("json");
  // Written after every context too: a long run stopped midway keeps the cells it filled.
  auto write_json = [&](const EvalTable& t, bool complete) {
    if (!json_path) return true;
    std::string command = "kvserve";
    for (int i = 1; i < argc; ++i) absl::StrAppend(&command, " ", argv[i]);
    nlohmann::json meta = {{"command", command},
                           {"model", *model_spec},
                           {"samples", plan.samples},
                           {"sample_range", {plan.first_sample, plan.sample_end()}},
                           {"complete", complete},
                           {"prompt_style", std::string(PromptStyleName(plan.style))},
                           {"window", plan.base.window},
                           {"pool_kernel", plan.base.pool_kernel},
                           {"prefill_chunk", plan.prefill_chunk},
                           {"chunk_headroom", plan.base.chunk_headroom},
                           {"page_size", plan.page_size},
                           {"seed", plan.seed},
                           {"cpu_isa", cpu_isa},
                           {"wall_seconds", std::chrono::duration<double>(Clock::now() - t0).count()}};
    // Set only with --sink-tokens: unset, each policy keeps its own (SinkTokens).
    if (plan.base.n_sink) meta["sink_tokens"] = *plan.base.n_sink;
    if (!plan.full_reference) meta["full_reference"] = false;
    // Before it (and " hashed" after the seed in the header line above), seed s's sample i was
    // seed 0's sample i ^ s (SampleRng): a file without it and a seed other than 0 ran seed 0's
    // prompts, which scripts/quality_headline.py pools so and scripts/quality_pairs.py tells apart.
    meta["seed_hashed"] = true;
    std::ofstream out(*json_path);
    out << EvalTableJson(t, meta.dump()) << "\n";
    return static_cast<bool>(out);
  };
  KV_ASSIGN_OR_FAIL(table, RunEvalPlan(
                                 model, tokenizer, *backend, plan, corpus.get(),
                                 [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); },
                                 [&](const EvalTable& t) { write_json(t, false); }));
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  std::fputs(FormatEvalTable(table).c_str(), stdout);
  std::printf("\nwall time %.1f s (%lld contexts prefilled, %lld configurations scored)\n", wall,
              static_cast<long long>(table.contexts_prefilled), static_cast<long long>(table.configs_scored));
  if (!write_json(table, true)) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--json: cannot write '", *json_path, "'")));
  }
  return 0;
}

}  // namespace kvserve
