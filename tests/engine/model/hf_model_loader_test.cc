// LoadHfModel on the golden transformers checkpoints (tests/golden/hf/, made by
// tests/golden/make_hf_golden.py) and on broken copies of them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/model/model_loader.h"
#include "engine/model/safetensors_file.h"
#include "tests/test_paths.h"

namespace kvserve {
namespace {

namespace fs = std::filesystem;

std::string Golden(const std::string& name) { return testing::SourcePath("tests/golden/hf/" + name); }

float At(const WeightView& w, int64_t i) {
  if (w.dtype == DType::kF32) {
    float f;
    std::memcpy(&f, static_cast<const char*>(w.data) + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, static_cast<const char*>(w.data) + 2 * i, 2);
  return w.dtype == DType::kBF16 ? Bf16ToF32(h) : F16ToF32(h);
}

// A writable copy of a golden folder, with config.json edited by `edit` (old -> new text).
std::string CopyWithConfigEdit(const std::string& name, const std::string& from, const std::string& to) {
  fs::path dst = fs::temp_directory_path() / ("kvserve_hf_" + std::to_string(::getpid()) + "_" + name + "_" +
                                              std::to_string(std::hash<std::string>()(from + to)));
  fs::remove_all(dst);
  fs::copy(Golden(name), dst, fs::copy_options::recursive);
  fs::permissions(dst / "config.json", fs::perms::owner_write, fs::perm_options::add);
  std::ifstream in(dst / "config.json");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  if (!from.empty()) {
    size_t pos = text.find(from);
    EXPECT_NE(pos, std::string::npos) << from;
    if (pos != std::string::npos) text.replace(pos, from.size(), to);
  }
  in.close();
  std::ofstream(dst / "config.json", std::ios::trunc) << text;
  return dst.string();
}

TEST(HfModelLoaderTest, LlamaF32Untied) {
  auto m = LoadHfModel(Golden("llama"));
  ASSERT_TRUE(m.ok()) << m.status();
  const ModelConfig& c = m->config;
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.n_layers, 3);
  EXPECT_TRUE(c.rope_neox);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kLlama3);
  ASSERT_EQ(m->weights.layers.size(), 3u);
  const LayerWeights& l0 = m->weights.layers[0];
  EXPECT_EQ(l0.wq.dtype, DType::kF32);
  EXPECT_EQ(l0.wq.rows, 64);
  EXPECT_EQ(l0.wq.cols, 64);
  EXPECT_EQ(l0.wk.rows, 32);  // 2 kv heads x 16
  EXPECT_EQ(l0.wk.cols, 64);
  EXPECT_EQ(l0.wo.rows, 64);
  EXPECT_EQ(l0.w_gate.rows, 128);
  EXPECT_EQ(l0.w_gate.cols, 64);
  EXPECT_EQ(l0.w_down.rows, 64);
  EXPECT_EQ(l0.w_down.cols, 128);
  EXPECT_EQ(l0.bq.data, nullptr);
  EXPECT_EQ(l0.attn_norm.dtype, DType::kF32);
  EXPECT_EQ(l0.attn_norm.cols, 64);
  EXPECT_EQ(m->weights.token_embd.rows, 320);
  EXPECT_NE(m->weights.output.data, m->weights.token_embd.data);
  EXPECT_EQ(m->weights.rope_freq_factors.data, nullptr);

  // The views point at exactly the stored values, [out, in] row-major.
  auto f = SafetensorsFile::Open(Golden("llama/model.safetensors"));
  ASSERT_TRUE(f.ok()) << f.status();
  const SafetensorsTensor* k1 = (*f)->Find("model.layers.1.self_attn.k_proj.weight");
  ASSERT_NE(k1, nullptr);
  std::vector<float> want = TensorToF32(*k1);
  for (int64_t i : {0, 1, 63, 64, 32 * 64 - 1}) EXPECT_EQ(At(m->weights.layers[1].wk, i), want[i]) << i;
  std::vector<float> norm = TensorToF32(*(*f)->Find("model.layers.2.post_attention_layernorm.weight"));
  for (int64_t i = 0; i < 64; ++i) EXPECT_EQ(At(m->weights.layers[2].ffn_norm, i), norm[i]);

  const TokenizerSpec& t = m->tokenizer;
  EXPECT_EQ(t.model, "gpt2");
  EXPECT_EQ(t.pre, "llama-bpe");
  EXPECT_EQ(t.tokens.size(), 320u);
  EXPECT_EQ(t.bos_id, 0);
  EXPECT_EQ(t.eos_id, 1);
  EXPECT_TRUE(t.add_bos);
}

TEST(HfModelLoaderTest, Qwen2ShardedTiedWithBiases) {
  auto m = LoadHfModel(Golden("qwen2"));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->config.architecture, "qwen2");
  EXPECT_TRUE(m->config.qkv_bias);
  EXPECT_TRUE(m->config.tied_embeddings);
  EXPECT_EQ(m->weights.output.data, m->weights.token_embd.data);
  ASSERT_EQ(m->weights.layers.size(), 2u);
  const LayerWeights& l1 = m->weights.layers[1];
  EXPECT_EQ(l1.bq.dtype, DType::kF32);
  EXPECT_EQ(l1.bq.cols, 64);
  EXPECT_EQ(l1.bk.cols, 32);
  EXPECT_EQ(l1.bv.cols, 32);
  // Find the shard holding the bias and compare the values.
  bool found = false;
  for (const auto& entry : fs::directory_iterator(Golden("qwen2"))) {
    if (entry.path().extension() != ".safetensors") continue;
    auto f = SafetensorsFile::Open(entry.path().string());
    ASSERT_TRUE(f.ok()) << f.status();
    if (const SafetensorsTensor* b = (*f)->Find("model.layers.1.self_attn.v_proj.bias")) {
      std::vector<float> want = TensorToF32(*b);
      for (int64_t i = 0; i < 32; ++i) EXPECT_EQ(At(l1.bv, i), want[i]);
      found = true;
    }
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(m->tokenizer.pre, "qwen2");
  EXPECT_EQ(m->tokenizer.bos_id, -1);
  EXPECT_EQ(m->tokenizer.eos_id, 3);  // <|im_end|>
  EXPECT_NE(m->tokenizer.chat_template.find("<|im_start|>"), std::string::npos);  // chat_template.jinja
}

TEST(HfModelLoaderTest, MistralBf16) {
  auto m = LoadHfModel(Golden("mistral"));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->config.architecture, "mistral");
  EXPECT_EQ(m->config.head_dim, 32);
  const LayerWeights& l0 = m->weights.layers[0];
  EXPECT_EQ(l0.wq.dtype, DType::kBF16);
  EXPECT_EQ(l0.wq.rows, 128);  // 4 heads x 32
  EXPECT_EQ(l0.wq.cols, 64);
  EXPECT_EQ(l0.wo.rows, 64);
  EXPECT_EQ(l0.wo.cols, 128);
  EXPECT_EQ(m->weights.token_embd.dtype, DType::kBF16);
  // Norm gains are widened from bf16 to F32.
  EXPECT_EQ(l0.attn_norm.dtype, DType::kF32);
  auto f = SafetensorsFile::Open(Golden("mistral/model.safetensors"));
  ASSERT_TRUE(f.ok()) << f.status();
  std::vector<float> norm = TensorToF32(*(*f)->Find("model.norm.weight"));
  for (int64_t i = 0; i < 64; ++i) EXPECT_EQ(At(m->weights.output_norm, i), norm[i]);
  EXPECT_EQ(m->tokenizer.model, "llama");
  EXPECT_EQ(m->tokenizer.bos_id, 1);
  EXPECT_EQ(m->tokenizer.eos_id, 2);
  EXPECT_EQ(m->tokenizer.unk_id, 0);
}

TEST(HfModelLoaderTest, LoadModelDispatchesFolders) {
  auto m = LoadModel(Golden("llama"));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->config.n_layers, 3);
}

TEST(HfModelLoaderTest, MissingTensorIsNamed) {
  auto m = LoadHfModel(CopyWithConfigEdit("llama", "\"num_hidden_layers\": 3", "\"num_hidden_layers\": 4"));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("'model.layers.3.self_attn.q_proj.weight'"), std::string::npos)
      << m.status();
}

TEST(HfModelLoaderTest, ShapeMismatchIsNamed) {
  auto m = LoadHfModel(CopyWithConfigEdit("llama", "\"intermediate_size\": 128", "\"intermediate_size\": 96"));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("'model.layers.0.mlp.gate_proj.weight' has shape [128, 64]"),
            std::string::npos)
      << m.status();
}

TEST(HfModelLoaderTest, UntiedWithoutLmHeadFails) {
  auto m = LoadHfModel(CopyWithConfigEdit("qwen2", "\"tie_word_embeddings\": true", "\"tie_word_embeddings\": false"));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("'lm_head.weight'"), std::string::npos) << m.status();
}

TEST(HfModelLoaderTest, MissingFiles) {
  std::string dir = CopyWithConfigEdit("llama", "", "");
  fs::remove(fs::path(dir) / "tokenizer.json");
  auto no_tok = LoadHfModel(dir);
  ASSERT_FALSE(no_tok.ok());
  EXPECT_NE(no_tok.status().message().find("tokenizer.json"), std::string::npos) << no_tok.status();
  fs::remove(fs::path(dir) / "model.safetensors");
  auto no_weights = LoadHfModel(dir);
  ASSERT_FALSE(no_weights.ok());
  EXPECT_NE(no_weights.status().message().find("model.safetensors"), std::string::npos) << no_weights.status();
  auto no_dir = LoadHfModel("/nonexistent/folder");
  ASSERT_FALSE(no_dir.ok());
  EXPECT_NE(no_dir.status().message().find("/nonexistent/folder"), std::string::npos) << no_dir.status();
}

}  // namespace
}  // namespace kvserve
