#include <cctype>
// The flag help names every KV policy, budget plan, compress-at, chunk-scoring and evicted-weight
// value the engine accepts. The help (server/flags) cannot read the engine's name tables, so this
// test is what keeps a new name in one of them from going unmentioned in --help.
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "engine/budget/layer_budget.h"
#include "engine/compress/compression_settings.h"
#include "server/flags/flag_help.h"

namespace kvserve {
namespace {

// Whether `help` names `name` as a whole word (so "pyramid" is not found inside "pyramids").
bool NamesWord(std::string_view help, std::string_view name) {
  auto is_word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':'; };
  for (size_t at = help.find(name); at != std::string_view::npos; at = help.find(name, at + 1)) {
    const size_t end = at + name.size();
    if ((at == 0 || !is_word(help[at - 1])) && (end == help.size() || !is_word(help[end]))) return true;
  }
  return false;
}

TEST(KvNameHelpTest, KvPolicyHelpNamesEveryPolicy) {
  const std::string_view help = HelpOf("kv-policy").help;
  for (const std::string& name : KvPolicyNames()) EXPECT_TRUE(NamesWord(help, name)) << name << " in: " << help;
}

TEST(KvNameHelpTest, BudgetPlanHelpNamesEveryPlan) {
  const std::string_view help = HelpOf("budget-plan").help;
  for (std::string_view name : BudgetPlanNames()) {
    // ripple is written with its argument, ripple:PROFILE.json.
    EXPECT_TRUE(NamesWord(help, name) || help.find(std::string(name) + ":") != std::string_view::npos)
        << name << " in: " << help;
  }
}

TEST(KvNameHelpTest, CompressAtAndChunkScoringHelpNameEveryValue) {
  for (std::string_view name : CompressAtNames()) EXPECT_TRUE(NamesWord(HelpOf("compress-at").help, name)) << name;
  for (std::string_view name : ChunkScoringNames()) EXPECT_TRUE(NamesWord(HelpOf("chunk-scoring").help, name)) << name;
}

TEST(KvNameHelpTest, EvictedWeightHelpNamesEveryValue) {
  const std::string_view help = HelpOf("evicted-weight").help;
  for (std::string_view name : EvictedWeightNames()) EXPECT_TRUE(NamesWord(help, name)) << name << " in: " << help;
}

TEST(KvNameHelpTest, NamesWordFindsOnlyWholeNames) {
  EXPECT_TRUE(NamesWord("full, snapkv or pyramid", "pyramid"));
  EXPECT_FALSE(NamesWord("pyramids", "pyramid"));
  EXPECT_FALSE(NamesWord("mergereduce:random", "random"));
}

}  // namespace
}  // namespace kvserve
