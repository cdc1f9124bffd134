// The eval result table: cells, means with intervals, markdown and JSON.
#include "engine/offline/eval_table.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace kvserve {
namespace {

double Mean(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

std::string BudgetLabel(const EvalRow& row) {
  if (row.policy == "full") return "-";
  return row.auto_risk > 0 ? absl::StrFormat("auto:%.2f", row.auto_risk) : absl::StrFormat("%.2f", row.budget);
}

std::string Header(const EvalTable& t, const std::string& first_columns) {
  std::string out = first_columns, rule = "|---|---:|";
  for (const EvalColumn& c : t.columns) {
    absl::StrAppend(&out, " ", std::string(EvalTaskName(c.task)), "@", c.context, " |");
    rule += "---:|";
  }
  return absl::StrCat(out, "\n", rule, "\n");
}

}  // namespace

double EvalCell::mean() const { return Mean(values); }
bool EvalCell::has_nll_gaps() const {
  return !nll_gaps.empty() && std::none_of(nll_gaps.begin(), nll_gaps.end(), [](double g) { return std::isnan(g); });
}

double EvalCell::mean_nll_gap() const { return Mean(nll_gaps); }
double EvalCell::budget_share() const { return Mean(budget_shares); }
Interval EvalCell::nll_gap_interval() const { return BootstrapMeanInterval(nll_gaps); }

Interval EvalCell::interval(EvalTask task) const {
  if (values.empty()) return {};
  if (task == EvalTask::kKl) return BootstrapMeanInterval(values);
  const auto right = static_cast<int64_t>(std::lround(std::accumulate(values.begin(), values.end(), 0.0)));
  return WilsonInterval(right, static_cast<int64_t>(values.size()));
}

std::string FormatEvalTable(const EvalTable& t) {
  std::string out = Header(t, "| policy | budget |");
  bool any_retrieval = false;
  for (size_t r = 0; r < t.rows.size(); ++r) {
    const EvalRow& row = t.rows[r];
    absl::StrAppend(&out, "| ", row.policy, " | ", BudgetLabel(row), " |");
    for (size_t c = 0; c < t.columns.size(); ++c) {
      const EvalCell& cell = t.cell(r, c);
      const EvalTask task = t.columns[c].task;
      any_retrieval = any_retrieval || task != EvalTask::kKl;
      const Interval ci = cell.interval(task);
      const char* fmt = task == EvalTask::kKl ? " %.4f [%.4f, %.4f]" : " %.2f [%.2f, %.2f]";
      absl::StrAppend(&out, absl::StrFormat(fmt, cell.mean(), ci.low, ci.high));
      if (row.auto_risk > 0) absl::StrAppend(&out, absl::StrFormat(" (%.2f)", cell.budget_share()));
      out += " |";
    }
    out += "\n";
  }
  if (!any_retrieval) return out;
  absl::StrAppend(&out, "\nAnswer NLL gap to the full cache (nats, mean [95% interval]; retrieval columns):\n\n",
                  Header(t, "| policy | budget |"));
  for (size_t r = 0; r < t.rows.size(); ++r) {
    absl::StrAppend(&out, "| ", t.rows[r].policy, " | ", BudgetLabel(t.rows[r]), " |");
    for (size_t c = 0; c < t.columns.size(); ++c) {
      const EvalCell& cell = t.cell(r, c);
      if (t.columns[c].task == EvalTask::kKl || !cell.has_nll_gaps()) {
        out += " - |";
        continue;
      }
      const Interval ci = cell.nll_gap_interval();
      absl::StrAppend(&out, absl::StrFormat(" %.3f [%.3f, %.3f] |", cell.mean_nll_gap(), ci.low, ci.high));
    }
    out += "\n";
  }
  return out;
}

std::string EvalTableJson(const EvalTable& t, const std::string& meta_json) {
  nlohmann::json cells = nlohmann::json::array();
  for (size_t r = 0; r < t.rows.size(); ++r) {
    for (size_t c = 0; c < t.columns.size(); ++c) {
      const EvalCell& cell = t.cell(r, c);
      const EvalTask task = t.columns[c].task;
      const Interval ci = cell.interval(task);
      nlohmann::json j = {{"policy", t.rows[r].policy},
                          {"budget", BudgetLabel(t.rows[r])},
                          {"task", std::string(EvalTaskName(task))},
                          {"context", t.columns[c].context},
                          {"n", cell.values.size()},
                          {"mean", cell.mean()},
                          {"ci95", {ci.low, ci.high}},
                          {"budget_share", cell.budget_share()},
                          {"peak_kv_bytes", cell.peak_kv_bytes},
                          {"values", cell.values}};
      if (task != EvalTask::kKl) {
        if (cell.has_nll_gaps()) {
          const Interval g = cell.nll_gap_interval();
          j["answer_nll_gap"] = cell.mean_nll_gap();
          j["answer_nll_gap_ci95"] = {g.low, g.high};
          j["answer_nll_gaps"] = cell.nll_gaps;
        }
        j["answer_nlls"] = cell.answer_nlls;
        // Per sample, the share of layer-heads holding the needle (its key, the other needles'
        // numbers on average); null where unknown.
        const auto shares = [](const std::vector<double>& v) {
          nlohmann::json out = nlohmann::json::array();
          for (double h : v) out.push_back(std::isnan(h) ? nlohmann::json() : nlohmann::json(h));
          return out;
        };
        j["needle_held"] = shares(cell.needle_held);
        j["cue_held"] = shares(cell.cue_held);
        j["decoy_held"] = shares(cell.decoy_held);
        j["answers"] = cell.answers;
      }
      cells.push_back(std::move(j));
    }
  }
  nlohmann::json out = {{"meta", nlohmann::json::parse(meta_json.empty() ? "{}" : meta_json)},
                        {"contexts_prefilled", t.contexts_prefilled},
                        {"configs_scored", t.configs_scored},
                        {"cells", std::move(cells)}};
  // A model's answer can end inside a multi-byte character: replace, rather than throw on, bad UTF-8.
  return out.dump(1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace kvserve
