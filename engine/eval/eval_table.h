// The result of `kvserve eval`: mean scores by (policy, budget) row and task@context column,
// and its markdown rendering.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/eval/eval_task.h"

namespace kvserve {

struct EvalRow {
  std::string policy;
  double budget = 1.0;  // fraction of the context kept; 1 for full
  double auto_risk = 0; // > 0: the budget is auto:RISK, picked per context (budget unused)
};

struct EvalColumn {
  EvalTask task = EvalTask::kKl;
  int64_t context = 0;
};

struct EvalTable {
  std::vector<EvalRow> rows;
  std::vector<EvalColumn> columns;
  std::vector<double> mean;  // [rows, columns]: mean KL in nats, or the fraction answered right
  std::vector<double> budget_share;  // [rows, columns]: mean per-layer budget as a share of the context
  int64_t contexts_prefilled = 0;
  int64_t configs_scored = 0;

  double& at(size_t row, size_t col) { return mean[row * columns.size() + col]; }
  double at(size_t row, size_t col) const { return mean[row * columns.size() + col]; }
  double& budget_share_at(size_t row, size_t col) { return budget_share[row * columns.size() + col]; }
  double budget_share_at(size_t row, size_t col) const { return budget_share[row * columns.size() + col]; }
};

// | policy | budget | kl@2048 | ... |, KL with 4 decimals, accuracy with 2; full's budget is "-".
// An auto:RISK row shows "auto:RISK" as its budget and, in each cell, the per-layer budget
// the risk picked as a share of the context: "0.0512 (0.14)".
std::string FormatEvalTable(const EvalTable& table);

}  // namespace kvserve
