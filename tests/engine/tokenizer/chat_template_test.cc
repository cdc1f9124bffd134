// RenderChat against jinja2's rendering of the real templates (tests/golden/
// chat_templates.json, made by make_tokenizer_golden.py), plus family detection errors.
#include "engine/tokenizer/chat_template.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/engine/tokenizer/tokenizer_test_util.h"

namespace kvserve {
namespace {

using ::kvserve::testing::ReadGoldenJson;
using ::kvserve::testing::SmolLm2TokenizerSpec;

std::vector<ChatMessage> Messages(const nlohmann::json& j) {
  std::vector<ChatMessage> out;
  for (const auto& m : j) out.push_back({m["role"], m["content"]});
  return out;
}

TEST(ChatTemplateTest, MatchesJinjaRendering) {
  const nlohmann::json golden = ReadGoldenJson("tests/golden/chat_templates.json");
  int checked = 0;
  for (const auto& t : golden["templates"]) {
    TokenizerSpec spec;
    spec.chat_template = t["template"];
    spec.tokens = {t["bos_token"].get<std::string>()};
    spec.bos_id = 0;
    for (const auto& c : t["cases"]) {
      absl::StatusOr<std::string> got =
          RenderChat(spec, Messages(c["messages"]), c["add_generation_prompt"]);
      ASSERT_TRUE(got.ok()) << t["name"] << ": " << got.status();
      EXPECT_EQ(*got, c["expected"].get<std::string>())
          << t["name"] << ", messages " << c["messages"].dump()
          << ", add_generation_prompt=" << c["add_generation_prompt"];
      ++checked;
    }
  }
  EXPECT_GE(checked, 100);
}

// The template as the GGUF loader reads it renders SmolLM2's default system prompt.
TEST(ChatTemplateTest, SmolLm2FromGguf) {
  const TokenizerSpec& spec = SmolLm2TokenizerSpec();
  ASSERT_FALSE(spec.chat_template.empty());
  EXPECT_EQ(*DetectChatTemplate(spec.chat_template), ChatTemplateFamily::kChatMl);
  const std::vector<ChatMessage> msgs = {{"user", "Hi"}};
  absl::StatusOr<std::string> got = RenderChat(spec, msgs, true);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, UnknownTemplatesAreErrors) {
  TokenizerSpec spec;
  const std::vector<ChatMessage> msgs = {{"user", "Hi"}};
  EXPECT_EQ(RenderChat(spec, msgs, true).status().code(), absl::StatusCode::kFailedPrecondition);
  spec.chat_template = "{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}";
  absl::Status st = RenderChat(spec, msgs, true).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("[INST]"), std::string::npos) << st;
}

}  // namespace
}  // namespace kvserve
