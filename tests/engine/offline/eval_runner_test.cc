// RunEvalPlan end to end on the tiny random model and the committed corpus: the table's shape,
// the full row's zero KL, and the markdown it prints.
#include "engine/offline/eval_runner.h"

#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "engine/model/model_loader.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/engine/tiny_model.h"
#include "tests/test_paths.h"

namespace kvserve {
namespace {

// The tiny random model (seed 1), its tokenizer and a CPU backend, for every RunEvalPlan test.
class EvalRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override { testing::MakeTinyModel(1, &model_, &tok_, &backend_); }

  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tok_;
  std::unique_ptr<Backend> backend_;
};

TEST_F(EvalRunnerTest, TinyModelTableHasEveryRowAndColumnAndAZeroFullRow) {
  auto corpus = TextCorpus::Load(testing::SourcePath("tests/data/corpus"), *tok_);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  EvalPlan plan;
  plan.policies = {"snapkv", "full", "streaming"};
  plan.budgets = {0.25, 0.5};
  plan.contexts = {260, 300};
  plan.tasks = {EvalTask::kKl, EvalTask::kPasskey};
  plan.samples = 2;
  plan.continuation = 16;
  plan.base.window = 16;
  std::vector<std::string> lines;
  std::vector<int64_t> checkpoints;  // contexts prefilled at each checkpoint
  auto table = RunEvalPlan(
      *model_, *tok_, *backend_, plan, &*corpus, [&](const std::string& l) { lines.push_back(l); },
      [&](const EvalTable& t) { checkpoints.push_back(t.contexts_prefilled); });
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(checkpoints, (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  ASSERT_EQ(table->rows.size(), 5u);
  EXPECT_EQ(table->rows[0].policy, "full");
  EXPECT_EQ(table->rows[1].policy, "snapkv");
  EXPECT_EQ(table->rows[4].budget, 0.5);
  ASSERT_EQ(table->columns.size(), 4u);
  EXPECT_EQ(table->contexts_prefilled, 8);
  EXPECT_EQ(table->configs_scored, 40);
  EXPECT_EQ(lines.size(), 8u);
  EXPECT_EQ(table->at(0, 0), 0.0);
  EXPECT_EQ(table->at(0, 1), 0.0);
  EXPECT_GT(table->at(1, 0), 0.0);  // snapkv keeping a quarter of a random model's cache
  const std::string md = FormatEvalTable(*table);
  EXPECT_NE(md.find("| policy | budget | kl@260 | kl@300 | passkey@260 | passkey@300 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| full | - | 0.0000 [0.0000, 0.0000] | 0.0000 [0.0000, 0.0000] |"), std::string::npos) << md;
  // Every cell keeps its samples; the JSON carries them with the interval and the NLL gap.
  EXPECT_EQ(table->cell(1, 0).values.size(), 2u);
  const nlohmann::json j = nlohmann::json::parse(EvalTableJson(*table, R"({"samples": 2})"));
  EXPECT_EQ(j["meta"]["samples"], 2);
  ASSERT_EQ(j["cells"].size(), 20u);
  const nlohmann::json& passkey_full = j["cells"][2];
  EXPECT_EQ(passkey_full["task"], "passkey");
  EXPECT_EQ(passkey_full["policy"], "full");
  EXPECT_EQ(passkey_full["n"], 2);
  EXPECT_EQ(passkey_full["answer_nll_gap"], 0.0);
  EXPECT_GT(passkey_full["peak_kv_bytes"].get<int64_t>(), 0);
  EXPECT_FALSE(j["cells"][0].contains("answer_nll_gap"));  // kl
  EXPECT_NE(md.find("| streaming | 0.50 |"), std::string::npos) << md;
}

TEST_F(EvalRunnerTest, WithoutTheFullReferenceChunkRowsKeepTheirAnswerNllsAndLoseOnlyTheGap) {
  EvalPlan plan;
  plan.policies = {"snapkv/chunk", "snapkv/chunk+merge-values"};
  plan.budgets = {0.25};
  plan.contexts = {300};
  plan.tasks = {EvalTask::kPasskey};
  plan.samples = 2;
  plan.base.window = 16;
  plan.prefill_chunk = 64;
  auto with_reference = RunEvalPlan(*model_, *tok_, *backend_, plan, nullptr);
  ASSERT_TRUE(with_reference.ok()) << with_reference.status();
  plan.full_reference = false;
  plan.verbose = true;
  std::vector<std::string> lines;
  auto without = RunEvalPlan(*model_, *tok_, *backend_, plan, nullptr,
                             [&](const std::string& line) { lines.push_back(line); });
  ASSERT_TRUE(without.ok()) << without.status();
  // The per-row lines say the gap was not measured instead of printing nan.
  int row_lines = 0;
  for (const std::string& line : lines) {
    EXPECT_EQ(line.find("gap nan"), std::string::npos) << line;
    if (line.find("(nll gap -; answer nll ") != std::string::npos) ++row_lines;
  }
  EXPECT_EQ(row_lines, 4) << absl::StrJoin(lines, "\n");
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(without->cell(r, 0).values, with_reference->cell(r, 0).values);
    EXPECT_EQ(without->cell(r, 0).answer_nlls, with_reference->cell(r, 0).answer_nlls);
    EXPECT_TRUE(with_reference->cell(r, 0).has_nll_gaps());
    EXPECT_FALSE(without->cell(r, 0).has_nll_gaps());
  }
  EXPECT_EQ(with_reference->contexts_prefilled, 2);
  EXPECT_EQ(without->contexts_prefilled, 0);  // no full-cache prefill
  EXPECT_EQ(without->configs_scored, 4);
  const nlohmann::json j = nlohmann::json::parse(EvalTableJson(*without, "{}"));
  EXPECT_FALSE(j["cells"][0].contains("answer_nll_gap"));
  EXPECT_EQ(j["cells"][0]["answer_nlls"].size(), 2u);
  // Each row's answer on each sample is in the JSON, as its progress line quoted it.
  std::vector<std::string> quoted;
  for (const std::string& line : lines) {
    if (line.find("(nll gap -; answer nll ") == std::string::npos) continue;
    const size_t open = line.find(" '");
    ASSERT_NE(open, std::string::npos) << line;
    quoted.push_back(line.substr(open + 2, line.size() - open - 3));
  }
  ASSERT_EQ(quoted.size(), 4u);
  for (size_t r = 0; r < 2; ++r) {
    ASSERT_TRUE(j["cells"][r].contains("answers"));
    ASSERT_EQ(j["cells"][r]["answers"].size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      // The random model's bytes are seldom UTF-8: the JSON holds them with bad bytes replaced.
      const std::string answer = j["cells"][r]["answers"][i].get<std::string>();
      const std::string quoted_in_json =
          nlohmann::json(quoted[i * 2 + r]).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      EXPECT_EQ(nlohmann::json(absl::StrReplaceAll(answer, {{"\n", "\\n"}})).dump(), quoted_in_json)
          << "row " << r << " sample " << i;
    }
  }
  EXPECT_NE(FormatEvalTable(*without).find("| snapkv/chunk | 0.25 | - |"), std::string::npos)
      << FormatEvalTable(*without);
  // What needs the full cache's prefill is refused, naming the flag and the row.
  for (const char* row : {"full", "snapkv", "snapkv/prefill_end"}) {
    plan.policies = {row};
    auto refused = RunEvalPlan(*model_, *tok_, *backend_, plan, nullptr);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << row;
    EXPECT_NE(refused.status().message().find("--no-full-reference"), std::string::npos) << refused.status();
  }
  plan.policies = {"snapkv/chunk"};
  plan.tasks = {EvalTask::kKl};
  auto kl = RunEvalPlan(*model_, *tok_, *backend_, plan, nullptr);
  EXPECT_EQ(kl.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(kl.status().message().find("--no-full-reference cannot score the kl task"), std::string::npos)
      << kl.status();
}

TEST_F(EvalRunnerTest, AutoRiskRowsReportTheBudgetTheyPicked) {
  auto corpus = TextCorpus::Load(testing::SourcePath("tests/data/corpus"), *tok_);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  EvalPlan plan;
  plan.policies = {"full", "snapkv"};
  plan.budgets = {0.5};
  plan.auto_risks = {0.05, 5.0};
  plan.contexts = {300};
  plan.tasks = {EvalTask::kKl};
  plan.samples = 1;
  plan.continuation = 16;
  plan.base.window = 16;
  auto table = RunEvalPlan(*model_, *tok_, *backend_, plan, &*corpus);
  ASSERT_TRUE(table.ok()) << table.status();
  ASSERT_EQ(table->rows.size(), 4u);  // full, snapkv 0.5, snapkv auto:0.05, snapkv auto:5
  EXPECT_EQ(table->rows[2].auto_risk, 0.05);
  EXPECT_EQ(table->budget_share_at(0, 0), 1.0);               // the full cache keeps everything
  EXPECT_NEAR(table->budget_share_at(1, 0), 0.5, 1.0 / 300);  // a fixed half
  // A lower risk picks at least as large a budget.
  EXPECT_GE(table->budget_share_at(2, 0), table->budget_share_at(3, 0));
  EXPECT_GT(table->budget_share_at(3, 0), 0.0);
  EXPECT_LE(table->budget_share_at(2, 0), 1.0);
  const std::string md = FormatEvalTable(*table);
  EXPECT_NE(md.find("| snapkv | auto:0.05 | "), std::string::npos) << md;
  EXPECT_NE(md.find("| snapkv | 0.50 | "), std::string::npos) << md;
  EXPECT_EQ(md.find("| snapkv | 0.50 | 0.0000 ("), std::string::npos) << md;  // fixed rows show no share
  EXPECT_NE(md.find(") |"), std::string::npos) << md;
  plan.base.at = CompressAt::kChunk;  // auto needs the whole prompt
  EXPECT_EQ(RunEvalPlan(*model_, *tok_, *backend_, plan, &*corpus).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(EvalRunnerTest, AContextTooShortForItsTaskFailsBeforeAnyPrefill) {
  EvalPlan plan;
  plan.policies = {"full"};
  plan.budgets = {0.5};
  plan.contexts = {2000, 100};
  plan.tasks = {EvalTask::kPasskey};
  int lines = 0;
  auto table = RunEvalPlan(*model_, *tok_, *backend_, plan, nullptr, [&](const std::string&) { ++lines; });
  EXPECT_NE(table.status().message().find("passkey context of 100 tokens is too short"), std::string::npos)
      << table.status();
  EXPECT_EQ(lines, 0);
  plan.contexts = {300};
  plan.tasks = {EvalTask::kKl};
  EXPECT_NE(RunEvalPlan(*model_, *tok_, *backend_, plan, nullptr).status().message().find("corpus"), std::string::npos);
}

TEST_F(EvalRunnerTest, MultikeyRowsSayWhetherTheAskedNeedlesKeyAndTheOtherNeedlesSurvive) {
  // A multikey row answering another key's number may have dropped the needle's key rather
  // than its number, or kept the other needles as widely: the JSON and the verbose lines carry
  // the key's and the other needles' survival beside the answer's.
  EvalPlan plan;
  plan.policies = {"full", "streaming"};
  plan.budgets = {0.25};
  plan.contexts = {700};
  plan.tasks = {EvalTask::kMultikey, EvalTask::kPasskey};
  plan.samples = 2;
  plan.base.window = 16;
  plan.verbose = true;
  std::vector<std::string> lines;
  auto table = RunEvalPlan(*model_, *tok_, *backend_, plan, nullptr, [&](const std::string& l) { lines.push_back(l); });
  ASSERT_TRUE(table.ok()) << table.status();
  const nlohmann::json j = nlohmann::json::parse(EvalTableJson(*table, "{}"));
  int multikey_cells = 0;
  for (const nlohmann::json& cell : j["cells"]) {
    for (const char* field : {"cue_held", "decoy_held"}) {
      ASSERT_EQ(cell[field].size(), 2u) << field << cell.dump();
      for (const nlohmann::json& held : cell[field]) {
        if (cell["task"] == "passkey") {
          EXPECT_TRUE(held.is_null()) << field;  // a passkey has no key or other needles
        } else if (cell["policy"] == "full") {
          EXPECT_EQ(held.get<double>(), 1.0) << field;
        } else {
          ASSERT_TRUE(held.is_number()) << field << cell.dump();
          EXPECT_GE(held.get<double>(), 0.0) << field;
          EXPECT_LE(held.get<double>(), 1.0) << field;
        }
      }
    }
    multikey_cells += cell["task"] == "multikey";
  }
  EXPECT_EQ(multikey_cells, 2);
  int keyed = 0;
  for (const std::string& line : lines) {
    keyed += line.find(", its key by ") != std::string::npos &&
             line.find(", the other needles by ") != std::string::npos;
  }
  EXPECT_EQ(keyed, 4) << absl::StrJoin(lines, "\n");  // two multikey samples, two rows each
}

TEST(EvalTaskTest, NamesRoundTripAndUnknownOnesAreNamed) {
  for (EvalTask t : {EvalTask::kKl, EvalTask::kPasskey, EvalTask::kMultikey, EvalTask::kMultivalue,
                     EvalTask::kVariableTracking}) {
    EXPECT_EQ(*ParseEvalTask(EvalTaskName(t)), t);
  }
  EXPECT_NE(ParseEvalTask("needle").status().message().find("'needle'"), std::string::npos);
}

}  // namespace
}  // namespace kvserve
