// TokenizerSpecFromHfJson on the golden tokenizers and on small hand-written files.
#include "engine/tokenizer/hf_tokenizer_json.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/test_paths.h"

namespace kvserve {
namespace {

std::string Golden(const std::string& rel) { return testing::SourcePath("tests/golden/hf/" + rel); }

std::string WriteTemp(const std::string& name, const std::string& text) {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kvserve_tok_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string path = (dir / name).string();
  std::ofstream(path, std::ios::trunc) << text;
  return path;
}

TEST(HfTokenizerJsonTest, Llama3StyleByteLevel) {
  auto t = TokenizerSpecFromHfJson(Golden("llama/tokenizer.json"), Golden("llama/tokenizer_config.json"));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->model, "gpt2");
  EXPECT_EQ(t->pre, "llama-bpe");
  ASSERT_EQ(t->tokens.size(), 320u);
  EXPECT_EQ(t->tokens[0], "<|begin_of_text|>");
  EXPECT_EQ(t->types[0], TokenType::kControl);
  EXPECT_EQ(t->types[100], TokenType::kNormal);
  EXPECT_FALSE(t->merges.empty());
  EXPECT_EQ(t->merges[0].find(' ') != std::string::npos, true);
  EXPECT_TRUE(t->scores.empty());
  EXPECT_EQ(t->bos_id, 0);
  EXPECT_EQ(t->eos_id, 1);
  EXPECT_TRUE(t->add_bos);  // from the TemplateProcessing post-processor
  EXPECT_FALSE(t->add_space_prefix);
  // <|im_end|> ends a turn too.
  EXPECT_NE(std::find(t->eot_ids.begin(), t->eot_ids.end(), 3), t->eot_ids.end());
}

TEST(HfTokenizerJsonTest, Qwen2StyleWithChatTemplateFile) {
  auto t = TokenizerSpecFromHfJson(Golden("qwen2/tokenizer.json"), Golden("qwen2/tokenizer_config.json"));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->pre, "qwen2");
  EXPECT_EQ(t->eos_id, 3);
  EXPECT_EQ(t->pad_id, 1);
  EXPECT_EQ(t->bos_id, -1);
  EXPECT_FALSE(t->add_bos);
  EXPECT_EQ(t->chat_template.rfind("{% for m in messages %}", 0), 0u) << t->chat_template;
}

TEST(HfTokenizerJsonTest, SentencePieceStyle) {
  auto t = TokenizerSpecFromHfJson(Golden("mistral/tokenizer.json"), Golden("mistral/tokenizer_config.json"));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->model, "llama");
  EXPECT_TRUE(t->add_space_prefix);  // Metaspace prepend_scheme "first"
  EXPECT_TRUE(t->add_bos);
  EXPECT_EQ(t->unk_id, 0);
  EXPECT_EQ(t->bos_id, 1);
  EXPECT_EQ(t->eos_id, 2);
  ASSERT_GT(t->tokens.size(), 3u + 0x41);
  EXPECT_EQ(t->tokens[3 + 0x41], "<0x41>");
  EXPECT_EQ(t->types[3 + 0x41], TokenType::kByte);
  EXPECT_EQ(t->types[1], TokenType::kControl);
  ASSERT_EQ(t->scores.size(), t->tokens.size());
  // The first merge's product scores highest of all merge products.
  std::string first = t->merges[0];
  first.erase(first.find(' '), 1);
  auto it = std::find(t->tokens.begin(), t->tokens.end(), first);
  ASSERT_NE(it, t->tokens.end()) << first;
  EXPECT_EQ(t->scores[it - t->tokens.begin()], 0.0f);
}

TEST(HfTokenizerJsonTest, SmolLmPreTokenizerAndArrayMerges) {
  std::string tok = WriteTemp("smollm.json", R"({
    "added_tokens": [{"id": 4, "content": "<|im_start|>", "special": true},
                     {"id": 5, "content": "<|im_end|>", "special": true},
                     {"id": 7, "content": "<tool>", "special": false}],
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": true},
        {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}]},
    "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3},
              "merges": [["a", "b"]]}})");
  std::string cfg = WriteTemp("smollm_config.json", R"({
    "bos_token": {"content": "<|im_start|>", "special": true}, "eos_token": "<|im_end|>",
    "add_bos_token": false, "chat_template": "{{ messages }}"})");
  auto t = TokenizerSpecFromHfJson(tok, cfg);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->model, "gpt2");
  EXPECT_EQ(t->pre, "smollm");
  ASSERT_EQ(t->tokens.size(), 8u);
  EXPECT_EQ(t->tokens[6], "<unused_6>");  // a gap in the ids
  EXPECT_EQ(t->types[6], TokenType::kUnused);
  EXPECT_EQ(t->types[7], TokenType::kUserDefined);
  EXPECT_EQ(t->merges, std::vector<std::string>{"a b"});
  EXPECT_EQ(t->bos_id, 4);
  EXPECT_EQ(t->eos_id, 5);
  EXPECT_FALSE(t->add_bos);
  EXPECT_EQ(t->chat_template, "{{ messages }}");

  // Without tokenizer_config.json there is nothing to name bos/eos here.
  auto bare = TokenizerSpecFromHfJson(tok, "");
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_EQ(bare->bos_id, -1);
  EXPECT_EQ(bare->eos_id, -1);
}

TEST(HfTokenizerJsonTest, GptTwoStringMerges) {
  std::string tok = WriteTemp("gpt2.json", R"({
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "<|endoftext|>": 3},
              "merges": ["a b"]}})");
  auto t = TokenizerSpecFromHfJson(tok, "");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->pre, "gpt2");
  EXPECT_EQ(t->merges, std::vector<std::string>{"a b"});
  EXPECT_EQ(t->eos_id, 3);  // guessed from the conventional text
}

TEST(HfTokenizerJsonTest, Errors) {
  auto unigram = TokenizerSpecFromHfJson(
      WriteTemp("unigram.json", R"({"model": {"type": "Unigram", "vocab": [["a", 0.0]]}})"), "");
  ASSERT_FALSE(unigram.ok());
  EXPECT_NE(unigram.status().message().find("'Unigram'"), std::string::npos) << unigram.status();

  std::string tok = WriteTemp("plain.json", R"({"pre_tokenizer": {"type": "ByteLevel"},
      "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})");
  auto bad_bos = TokenizerSpecFromHfJson(tok, WriteTemp("badbos.json", R"({"bos_token": "<nope>"})"));
  ASSERT_FALSE(bad_bos.ok());
  EXPECT_NE(bad_bos.status().message().find("'<nope>'"), std::string::npos) << bad_bos.status();

  auto missing = TokenizerSpecFromHfJson("/nonexistent/tokenizer.json", "");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/tokenizer.json"), std::string::npos);

  auto bad_merge = TokenizerSpecFromHfJson(WriteTemp("badmerge.json", R"({"pre_tokenizer": {"type": "ByteLevel"},
      "model": {"type": "BPE", "vocab": {"a": 0}, "merges": [42]}})"), "");
  ASSERT_FALSE(bad_merge.ok());
  EXPECT_NE(bad_merge.status().message().find("42"), std::string::npos) << bad_merge.status();
}

}  // namespace
}  // namespace kvserve
