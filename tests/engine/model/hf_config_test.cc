// ParseHfConfig: the Llama-family config.json layouts of transformers v4 and v5.
#include "engine/model/hf_config.h"

#include <gtest/gtest.h>

#include "tests/test_paths.h"

namespace kvserve {
namespace {

// Llama-3.1-8B's config.json, transformers v4 layout (rope_theta + rope_scaling).
constexpr char kLlama31[] = R"({
  "architectures": ["LlamaForCausalLM"], "hidden_act": "silu", "hidden_size": 4096,
  "intermediate_size": 14336, "max_position_embeddings": 131072, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "tie_word_embeddings": false,
  "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "vocab_size": 128256, "attention_bias": false, "mlp_bias": false})";

TEST(HfConfigTest, Llama31WithLlama3RopeScaling) {
  auto c = ParseHfConfig(kLlama31);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "llama");
  EXPECT_EQ(c->n_layers, 32);
  EXPECT_EQ(c->hidden, 4096);
  EXPECT_EQ(c->n_heads, 32);
  EXPECT_EQ(c->n_kv_heads, 8);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->rope_dim, 128);
  EXPECT_EQ(c->ffn_hidden, 14336);
  EXPECT_EQ(c->vocab_size, 128256);
  EXPECT_EQ(c->max_context, 131072);
  EXPECT_FLOAT_EQ(c->rms_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c->rope_theta, 500000.0f);
  EXPECT_TRUE(c->rope_neox);
  EXPECT_FALSE(c->tied_embeddings);
  EXPECT_FALSE(c->qkv_bias);
  EXPECT_EQ(c->rope_scaling.type, RopeScaling::Type::kLlama3);
  EXPECT_FLOAT_EQ(c->rope_scaling.factor, 8.0f);
  EXPECT_FLOAT_EQ(c->rope_scaling.low_freq_factor, 1.0f);
  EXPECT_FLOAT_EQ(c->rope_scaling.high_freq_factor, 4.0f);
  EXPECT_EQ(c->rope_scaling.original_max_positions, 8192);
}

TEST(HfConfigTest, OldStyleTypeKeyAndLinearScaling) {
  auto c = ParseHfConfig(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64,
      "intermediate_size": 128, "max_position_embeddings": 4096, "num_attention_heads": 4,
      "num_hidden_layers": 2, "vocab_size": 100, "rope_scaling": {"type": "linear", "factor": 2.0}})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rope_scaling.type, RopeScaling::Type::kLinear);
  EXPECT_FLOAT_EQ(c->rope_scaling.factor, 2.0f);
  EXPECT_EQ(c->n_kv_heads, 4);  // absent -> plain multi-head attention
  EXPECT_FLOAT_EQ(c->rope_theta, 10000.0f);
  EXPECT_FLOAT_EQ(c->rms_eps, 1e-6f);
}

TEST(HfConfigTest, SmolLm2IsTiedLlama) {
  auto c = ParseHfConfig(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 576,
      "intermediate_size": 1536, "max_position_embeddings": 8192, "num_attention_heads": 9,
      "num_hidden_layers": 30, "num_key_value_heads": 3, "rms_norm_eps": 1e-05,
      "rope_theta": 100000, "rope_scaling": null, "tie_word_embeddings": true, "vocab_size": 49152,
      "head_dim": 64})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "llama");
  EXPECT_TRUE(c->tied_embeddings);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->n_kv_heads, 3);
  EXPECT_FLOAT_EQ(c->rope_theta, 100000.0f);  // an integer in the JSON
  EXPECT_EQ(c->rope_scaling.type, RopeScaling::Type::kNone);
}

TEST(HfConfigTest, Qwen2HasQkvBias) {
  auto c = ParseHfConfig(R"({"architectures": ["Qwen2ForCausalLM"], "hidden_size": 896,
      "intermediate_size": 4864, "max_position_embeddings": 32768, "num_attention_heads": 14,
      "num_hidden_layers": 24, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
      "rope_theta": 1000000.0, "sliding_window": 32768, "use_sliding_window": false,
      "tie_word_embeddings": true, "vocab_size": 151936})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "qwen2");
  EXPECT_TRUE(c->qkv_bias);
  EXPECT_TRUE(c->tied_embeddings);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->max_context, 32768);
}

TEST(HfConfigTest, MistralExplicitHeadDimAndSlidingWindow) {
  auto c = ParseHfConfig(R"({"architectures": ["MistralForCausalLM"], "hidden_size": 5120,
      "head_dim": 128, "intermediate_size": 14336, "max_position_embeddings": 32768,
      "num_attention_heads": 32, "num_hidden_layers": 40, "num_key_value_heads": 8,
      "sliding_window": 4096, "vocab_size": 131072, "rope_theta": 1000000.0})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "mistral");
  EXPECT_EQ(c->head_dim, 128);  // not 5120 / 32
  EXPECT_FALSE(c->qkv_bias);
  EXPECT_EQ(c->max_context, 4096);  // full attention is exact only inside the window
  auto no_window = ParseHfConfig(R"({"architectures": ["MistralForCausalLM"], "hidden_size": 64,
      "head_dim": null, "intermediate_size": 128, "max_position_embeddings": 32768,
      "num_attention_heads": 4, "num_hidden_layers": 2, "sliding_window": null, "vocab_size": 10})");
  ASSERT_TRUE(no_window.ok()) << no_window.status();
  EXPECT_EQ(no_window->head_dim, 16);
  EXPECT_EQ(no_window->max_context, 32768);
}

TEST(HfConfigTest, TransformersV5RopeParameters) {
  auto c = LoadHfConfig(testing::SourcePath("tests/golden/hf/llama/config.json"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->n_layers, 3);
  EXPECT_EQ(c->hidden, 64);
  EXPECT_EQ(c->vocab_size, 320);
  EXPECT_FLOAT_EQ(c->rope_theta, 500000.0f);
  EXPECT_EQ(c->rope_scaling.type, RopeScaling::Type::kLlama3);
  EXPECT_FLOAT_EQ(c->rope_scaling.factor, 8.0f);
  EXPECT_EQ(c->rope_scaling.original_max_positions, 8192);
  auto m = LoadHfConfig(testing::SourcePath("tests/golden/hf/mistral/config.json"));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->rope_scaling.type, RopeScaling::Type::kNone);
  EXPECT_FLOAT_EQ(m->rope_theta, 1000000.0f);
  EXPECT_EQ(m->head_dim, 32);
}

TEST(HfConfigTest, UnsupportedArchitectureIsNamed) {
  auto c = ParseHfConfig(R"({"architectures": ["GPT2LMHeadModel"], "n_embd": 768})");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("GPT2LMHeadModel"), std::string::npos) << c.status();
}

TEST(HfConfigTest, ErrorsNameTheField) {
  auto missing = ParseHfConfig(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64})");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("'num_hidden_layers'"), std::string::npos) << missing.status();
  auto bad_rope = ParseHfConfig(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64,
      "intermediate_size": 128, "max_position_embeddings": 4096, "num_attention_heads": 4,
      "num_hidden_layers": 2, "vocab_size": 100, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}})");
  ASSERT_FALSE(bad_rope.ok());
  EXPECT_NE(bad_rope.status().message().find("'yarn'"), std::string::npos) << bad_rope.status();
  auto gelu = ParseHfConfig(R"({"architectures": ["LlamaForCausalLM"], "hidden_act": "gelu"})");
  ASSERT_FALSE(gelu.ok());
  EXPECT_NE(gelu.status().message().find("gelu"), std::string::npos) << gelu.status();
  EXPECT_FALSE(ParseHfConfig("{not json").ok());
  auto nofile = LoadHfConfig("/nonexistent/config.json");
  ASSERT_FALSE(nofile.ok());
  EXPECT_NE(nofile.status().message().find("/nonexistent/config.json"), std::string::npos);
}

}  // namespace
}  // namespace kvserve
