// CliArgs on CLI11: values that look like flags stay values, aliases read back under the first
// name, and every malformed command line gets an error naming the flag.
#include "server/flags/cli_args.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/flags/flag_help.h"

namespace kvserve {
namespace {

absl::StatusOr<CliArgs> Parse(std::vector<std::string> words) {
  words.insert(words.begin(), "kvserve test");
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  return CliArgs::Parse(static_cast<int>(argv.size()), argv.data(), {"prompt", "stop", "decode-share", "kv-policy|policy"},
                        {"chat"}, "kvserve test [flags]\n");
}

TEST(CliArgsTest, ReadsValuesInBothFormsAndRepeats) {
  auto a = Parse({"--prompt", "hi there", "--stop=a=b", "--stop", "c", "--chat"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->Get("prompt"), "hi there");
  EXPECT_EQ(a->GetAll("stop"), (std::vector<std::string>{"a=b", "c"}));
  EXPECT_TRUE(a->Flag("chat"));
  EXPECT_FALSE(a->Has("decode-share"));
  EXPECT_FALSE(a->help());
}

TEST(CliArgsTest, ValuesThatLookLikeFlagsStayValues) {
  auto a = Parse({"--decode-share", "-0.5", "--prompt", "--chat", "--stop="});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a->GetDouble("decode-share", 0), -0.5);
  EXPECT_EQ(a->Get("prompt"), "--chat");
  EXPECT_FALSE(a->Flag("chat"));
  EXPECT_EQ(a->Get("stop"), "") << "--stop= is an empty value, not a missing one";
}

TEST(CliArgsTest, AnAliasReadsBackUnderTheFirstName) {
  auto a = Parse({"--policy", "snapkv"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->Get("kv-policy"), "snapkv");
}

TEST(CliArgsTest, ErrorsNameTheFlag) {
  EXPECT_EQ(Parse({"--frobnicate", "1"}).status().message(), "unknown flag --frobnicate");
  EXPECT_EQ(Parse({"--frobnicate=1"}).status().message(), "unknown flag --frobnicate");
  EXPECT_EQ(Parse({"stray"}).status().message(), "unexpected argument 'stray'");
  EXPECT_EQ(Parse({"--prompt"}).status().message(), "flag --prompt needs a value");
  EXPECT_EQ(Parse({"--chat=yes"}).status().message(), "flag --chat takes no value");
  EXPECT_EQ(Parse({"--frobnicate"}).status().code(), absl::StatusCode::kInvalidArgument);
  auto a = Parse({"--decode-share", "lots"});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->GetDouble("decode-share", 0).status().message(), "--decode-share must be a number, got 'lots'");
}

TEST(CliArgsTest, HelpIsAnsweredNotAnError) {
  testing::internal::CaptureStdout();
  auto a = Parse({"--prompt", "x", "--help"});
  const std::string out = testing::internal::GetCapturedStdout();
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->help());
  EXPECT_NE(out.find("kvserve test [flags]"), std::string::npos) << out;
  EXPECT_NE(out.find("--stop TEXT"), std::string::npos) << out;
  EXPECT_NE(out.find(std::string(HelpOf("stop").help)), std::string::npos) << out;
  EXPECT_NE(out.find("--kv-policy,--policy"), std::string::npos) << out;
}

TEST(FlagHelpTest, KnownFlagsHaveAMeaningUnknownOnesNone) {
  EXPECT_EQ(HelpOf("max-context").value, "N");
  EXPECT_FALSE(HelpOf("max-context").help.empty());
  EXPECT_TRUE(HelpOf("no-such-flag").help.empty());
}

}  // namespace
}  // namespace kvserve
