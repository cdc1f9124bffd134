// `kvserve eval`'s loop: every (task, context, sample) prefilled once and scored under every row.
#include "engine/offline/eval_runner.h"

#include <algorithm>
#include <cmath>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "engine/compress/kv_settings.h"
#include "engine/offline/cache_evaluator.h"
#include "engine/offline/retrieval_tasks.h"
#include "engine/offline/variable_tracking_task.h"

namespace kvserve {
namespace {

absl::StatusOr<EvalSample> BuildSample(const Model& model, const Tokenizer& tokenizer, const EvalPlan& plan,
                                       const TextCorpus* corpus, EvalTask task, int64_t context, int64_t sample) {
  if (task == EvalTask::kKl) {
    if (corpus == nullptr) return absl::InvalidArgumentError("the kl task needs a text corpus");
    return corpus->Sample(context, plan.continuation, sample, plan.seed);
  }
  const RetrievalSpec spec{context, sample, plan.samples, plan.seed, plan.style};
  switch (task) {
    case EvalTask::kPasskey: return BuildPasskeySample(tokenizer, model.tokenizer, spec);
    case EvalTask::kMultikey: return BuildMultikeySample(tokenizer, model.tokenizer, spec);
    case EvalTask::kMultivalue: return BuildMultivalueSample(tokenizer, model.tokenizer, spec);
    case EvalTask::kVariableTracking: return BuildVariableTrackingSample(tokenizer, model.tokenizer, spec);
    case EvalTask::kKl: break;
  }
  return absl::InternalError("unhandled eval task");
}

}  // namespace

std::vector<EvalRow> EvalRows(const EvalPlan& plan) {
  std::vector<EvalRow> rows;
  if (std::find(plan.policies.begin(), plan.policies.end(), "full") != plan.policies.end()) {
    rows.push_back({"full", 1.0});
  }
  for (const std::string& p : plan.policies) {
    if (p == "full") continue;
    for (double b : plan.budgets) rows.push_back({p, b});
    for (double r : plan.auto_risks) rows.push_back({p, 1.0, r});
  }
  return rows;
}

absl::StatusOr<EvalTable> RunEvalPlan(const Model& model, const Tokenizer& tokenizer, Backend& backend,
                                  const EvalPlan& plan, const TextCorpus* corpus,
                                  const std::function<void(const std::string&)>& progress,
                                  const std::function<void(const EvalTable&)>& checkpoint) {
  using Clock = std::chrono::steady_clock;
  if (plan.samples < 1) return absl::InvalidArgumentError(absl::StrCat("samples must be >= 1, got ", plan.samples));
  if (plan.first_sample < 0 || plan.first_sample >= plan.sample_end() || plan.sample_end() > plan.samples) {
    return absl::InvalidArgumentError(absl::StrCat("sample range ", plan.first_sample, ":", plan.sample_end(),
                                                   " is not a non-empty part of [0, ", plan.samples, ")"));
  }
  if (!plan.full_reference &&
      std::find(plan.tasks.begin(), plan.tasks.end(), EvalTask::kKl) != plan.tasks.end()) {
    return absl::InvalidArgumentError(
        "--no-full-reference cannot score the kl task (it needs the full cache's logits)");
  }
  EvalTable table;
  table.rows = EvalRows(plan);
  for (EvalTask t : plan.tasks) {
    for (int64_t c : plan.contexts) table.columns.push_back({t, c});
  }
  table.cells.assign(table.rows.size() * table.columns.size(), EvalCell{});

  // Build every sample first: a context too short for its task fails before any prefill.
  std::vector<std::vector<EvalSample>> samples(table.columns.size());
  int64_t max_extra = 0;
  for (size_t col = 0; col < table.columns.size(); ++col) {
    for (int64_t i = plan.first_sample; i < plan.sample_end(); ++i) {
      absl::StatusOr<EvalSample> s =
          BuildSample(model, tokenizer, plan, corpus, table.columns[col].task, table.columns[col].context, i);
      if (!s.ok()) return s.status();
      max_extra = std::max<int64_t>(max_extra, static_cast<int64_t>(s->continuation.size()));
      max_extra = std::max<int64_t>(max_extra, AnswerBudget(plan.answer_tokens, *s));
      samples[col].push_back(*std::move(s));
    }
  }
  std::vector<CompressionSettings> settings;
  for (const EvalRow& row : table.rows) {
    absl::StatusOr<KvSettings> kv = ParsePolicySpec(row.policy);
    if (!kv.ok()) return kv.status();
    CompressionSettings s = ResolveKvSettings(*kv, plan.base);
    // A row's name says its method: without a +merge suffix it drops the evicted weight, the
    // papers' SnapKV and CriticalKV, whatever the server's chunk-mode default (EvictedWeightOf),
    // so a row name means the same in every run and every file under docs/quality.
    if (!s.evicted_weight) s.evicted_weight = EvictedWeight::kDrop;
    s.budget = row.budget;
    s.auto_risk = row.auto_risk;
    if (absl::Status st = ValidateCompressionSettings(s, model.config.n_layers); !st.ok()) return st;
    if (!plan.full_reference && (!s.active() || s.at != CompressAt::kChunk)) {
      return absl::InvalidArgumentError(absl::StrCat("--no-full-reference scores chunk-mode rows only; row '",
                                                     row.policy, "' needs the full cache's prefill"));
    }
    settings.push_back(s);
  }

  CacheEvaluatorOptions o;
  o.max_context = *std::max_element(plan.contexts.begin(), plan.contexts.end());
  o.max_extra = std::max(max_extra, plan.answer_tokens);
  o.window = plan.base.window;
  o.page_size = plan.page_size;
  o.prefill_chunk = plan.prefill_chunk;
  o.answer_tokens = plan.answer_tokens;
  o.full_reference = plan.full_reference;
  CacheEvaluator evaluator(model, tokenizer, backend, o);
  // Long runs say where they are at least every kProgressSeconds, not only per context.
  constexpr double kProgressSeconds = 30;
  auto last_line = Clock::now();
  const auto run_start = last_line;
  const int64_t run_samples = plan.sample_end() - plan.first_sample;
  const int64_t total = static_cast<int64_t>(table.columns.size() * table.rows.size()) * run_samples;
  auto say = [&](const std::string& line) {
    if (!progress) return;
    progress(line);
    last_line = Clock::now();
  };
  for (size_t col = 0; col < table.columns.size(); ++col) {
    const EvalColumn& column = table.columns[col];
    for (int64_t i = plan.first_sample; i < plan.sample_end(); ++i) {
      const EvalSample& sample = samples[col][static_cast<size_t>(i - plan.first_sample)];
      if (absl::Status st = evaluator.Prefill(sample); !st.ok()) return st;
      if (plan.full_reference) ++table.contexts_prefilled;  // with the full cache; chunk rows prefill their own
      const auto t0 = Clock::now();
      std::string full_answer;
      for (size_t r = 0; r < table.rows.size(); ++r) {
        absl::StatusOr<EvalScore> score = evaluator.Score(settings[r]);
        if (!score.ok()) {
          return absl::Status(score.status().code(),
                              absl::StrCat(table.rows[r].policy, " at budget ",
                                           table.rows[r].auto_risk > 0 ? absl::StrCat("auto:", table.rows[r].auto_risk)
                                                                       : absl::StrCat(table.rows[r].budget),
                                           ": ", score.status().message()));
        }
        EvalCell& cell = table.cell(r, col);
        cell.values.push_back(score->value);
        if (column.task != EvalTask::kKl) {
          cell.nll_gaps.push_back(score->answer_nll_gap);
          cell.answer_nlls.push_back(score->answer_nll);
          cell.needle_held.push_back(score->answer_kept);
          cell.cue_held.push_back(score->cue_kept);
          cell.decoy_held.push_back(score->decoy_kept);
          cell.answers.push_back(evaluator.last_answer());
        }
        cell.budget_shares.push_back(
            std::min(1.0, evaluator.last_mean_quota() / static_cast<double>(column.context)));
        cell.peak_kv_bytes = std::max(cell.peak_kv_bytes, score->peak_kv_bytes);
        ++table.configs_scored;
        if (std::chrono::duration<double>(Clock::now() - last_line).count() >= kProgressSeconds) {
          const double elapsed = std::chrono::duration<double>(Clock::now() - run_start).count();
          say(absl::StrFormat("  ... %d/%d scored, %.0f s; now %s %.2f on %s@%d sample %d", table.configs_scored,
                              total, elapsed, table.rows[r].policy, table.rows[r].budget,
                              std::string(EvalTaskName(column.task)), column.context, i + 1));
        }
        if (table.rows[r].policy == "full") full_answer = evaluator.last_answer();
        if (plan.verbose && progress) {
          std::string kept = std::isnan(score->answer_kept)
                                 ? ""
                                 : absl::StrFormat("; needle held by %.0f%% of layer-heads", 100 * score->answer_kept);
          if (!std::isnan(score->cue_kept)) absl::StrAppendFormat(&kept, ", its key by %.0f%%", 100 * score->cue_kept);
          if (!std::isnan(score->decoy_kept)) {
            absl::StrAppendFormat(&kept, ", the other needles by %.0f%%", 100 * score->decoy_kept);
          }
          // "-" where a figure was not measured (no full-cache reference, or the kl task's answer).
          const auto figure = [](double x) { return std::isnan(x) ? std::string("-") : absl::StrFormat("%.3f", x); };
          say(absl::StrFormat("  %s %.2f: %.4f (nll gap %s; answer nll %s%s)%s", table.rows[r].policy,
                              table.rows[r].budget, score->value, figure(score->answer_nll_gap),
                              figure(score->answer_nll), kept,
                                   column.task == EvalTask::kKl
                                       ? ""
                                       : absl::StrCat(" '", absl::StrReplaceAll(evaluator.last_answer(),
                                                                                {{"\n", "\\n"}}), "'")));
        }
      }
      if (checkpoint) checkpoint(table);
      if (!progress) continue;
      const std::string prefill =
          plan.full_reference ? absl::StrFormat("prefill %.1f s (%.0f tok/s)", evaluator.prefill_seconds(),
                                                static_cast<double>(column.context) / evaluator.prefill_seconds())
                              : std::string("no full prefill");
      std::string line = absl::StrFormat("[%s@%d %d/%d] %s: %s, %d configs %.1f s",
                                         std::string(EvalTaskName(column.task)), column.context, i + 1, plan.samples,
                                         sample.source, prefill, table.rows.size(),
                                         std::chrono::duration<double>(Clock::now() - t0).count());
      if (column.task != EvalTask::kKl && !full_answer.empty()) {
        absl::StrAppend(&line, "; answer ", absl::StrJoin(sample.answers, " & "), ", full cache said '",
                        absl::StrReplaceAll(full_answer, {{"\n", "\\n"}}), "'");
      }
      say(line);
    }
  }
  return table;
}

}  // namespace kvserve
