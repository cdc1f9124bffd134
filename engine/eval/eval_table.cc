#include "engine/eval/eval_table.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kvserve {

std::string FormatEvalTable(const EvalTable& t) {
  std::string out = "| policy | budget |";
  std::string rule = "|---|---:|";
  for (const EvalColumn& c : t.columns) {
    absl::StrAppend(&out, " ", std::string(EvalTaskName(c.task)), "@", c.context, " |");
    rule += "---:|";
  }
  absl::StrAppend(&out, "\n", rule, "\n");
  for (size_t r = 0; r < t.rows.size(); ++r) {
    const EvalRow& row = t.rows[r];
    const std::string budget = row.policy == "full" ? "-"
                               : row.auto_risk > 0 ? absl::StrFormat("auto:%.2f", row.auto_risk)
                                                   : absl::StrFormat("%.2f", row.budget);
    absl::StrAppend(&out, "| ", row.policy, " | ", budget, " |");
    for (size_t c = 0; c < t.columns.size(); ++c) {
      absl::StrAppend(&out, " ", absl::StrFormat(t.columns[c].task == EvalTask::kKl ? "%.4f" : "%.2f", t.at(r, c)));
      if (row.auto_risk > 0 && !t.budget_share.empty()) absl::StrAppend(&out, absl::StrFormat(" (%.2f)", t.budget_share_at(r, c)));
      out += " |";
    }
    out += "\n";
  }
  return out;
}

}  // namespace kvserve
