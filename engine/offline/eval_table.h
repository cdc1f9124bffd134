// The result of `kvserve eval`: per (policy, budget) row and task@context column, every
// sample's score, their mean with a 95% confidence interval, the answer-likelihood gap to
// the full cache and the KV peak; its markdown and JSON renderings.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/offline/eval_stats.h"
#include "engine/offline/eval_task.h"

namespace kvserve {

struct EvalRow {
  std::string policy;   // POLICY[@PLAN][/MODE], as ParsePolicySpec (engine/compress/kv_settings.h) reads it
  double budget = 1.0;  // fraction of the context kept; 1 for full
  double auto_risk = 0; // > 0: the budget is auto:RISK, picked per context (budget unused)
};

struct EvalColumn {
  EvalTask task = EvalTask::kKl;
  int64_t context = 0;
};

struct EvalCell {
  std::vector<double> values;    // per sample: KL in nats (kl), or 1/0 answered right (retrieval)
  // Retrieval, per sample: answer NLL minus the full cache's (nats; NaN: no full-cache prefill).
  std::vector<double> nll_gaps;
  std::vector<double> answer_nlls;  // retrieval, per sample: the answer's NLL under the row (nats)
  std::vector<double> needle_held;  // retrieval, per sample: EvalScore::answer_kept (NaN: unknown)
  std::vector<double> cue_held;     // retrieval, per sample: EvalScore::cue_kept (NaN: unknown)
  std::vector<double> decoy_held;   // retrieval, per sample: EvalScore::decoy_kept (NaN: unknown)
  // Retrieval, per sample: the row's greedy answer, so a wrong one can be told apart later (a
  // digit short, another key's number) without rerunning the sample.
  std::vector<std::string> answers;
  std::vector<double> budget_shares;  // per sample: mean per-layer budget as a share of the context
  int64_t peak_kv_bytes = 0;     // the most any sample's prefill held

  double mean() const;
  // Wilson for a retrieval accuracy, bootstrap of the mean for KL.
  Interval interval(EvalTask task) const;
  // Whether the gaps were measured (a run without the full cache's prefill has none).
  bool has_nll_gaps() const;
  double mean_nll_gap() const;
  Interval nll_gap_interval() const;
  double budget_share() const;
};

struct EvalTable {
  std::vector<EvalRow> rows;
  std::vector<EvalColumn> columns;
  std::vector<EvalCell> cells;  // [rows, columns]
  int64_t contexts_prefilled = 0;  // with the full cache (none with --no-full-reference)
  int64_t configs_scored = 0;

  EvalCell& cell(size_t row, size_t col) { return cells[row * columns.size() + col]; }
  const EvalCell& cell(size_t row, size_t col) const { return cells[row * columns.size() + col]; }
  double at(size_t row, size_t col) const { return cell(row, col).mean(); }
  double budget_share_at(size_t row, size_t col) const { return cell(row, col).budget_share(); }
};

// | policy | budget | kl@2048 | ... |: each cell "mean [low, high]" (KL with 4 decimals,
// accuracy with 2); full's budget is "-". An auto:RISK row shows "auto:RISK" as its budget
// and appends the per-layer budget the risk picked, as a share of the context: "(0.14)".
// A second table gives each retrieval cell's answer NLL gap with its interval.
std::string FormatEvalTable(const EvalTable& table);

// Everything in the table as JSON (one object per row x column with n, mean, interval,
// nll gap, budget share and KV peak) for scripts/quality_table.py and other tools.
std::string EvalTableJson(const EvalTable& table, const std::string& meta_json);

}  // namespace kvserve
