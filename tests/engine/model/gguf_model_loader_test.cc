// LoadGgufModel: config, weights and tokenizer from tiny GGUFs written by the test (every
// mapping rule and error path), and from the real SmolLM2-135M Q4_1 file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/model/model_loader.h"
#include "kernels/cpu/dequantize.h"
#include "tests/engine/model/gguf_test_writer.h"
#include "tests/test_paths.h"

namespace kvserve {
namespace {

using testing::GgufEnc;
using testing::GgufTestWriter;

constexpr uint64_t kHidden = 64, kHeads = 4, kKvHeads = 2, kHeadDim = 16, kFfn = 96,
                   kLayers = 2, kVocab = 8;

struct TinyOptions {
  std::string arch = "llama";
  bool output = false;                 // write output.weight (untied)
  bool biases = false;                 // write attn_{q,k,v}.bias
  std::set<std::string> skip;          // tensors to leave out
  std::map<std::string, std::vector<uint64_t>> shapes;  // ne overrides
  std::function<void(GgufTestWriter&)> meta;            // extra metadata
};

// Q8_0 rows where every value of row r equals r (d = 1.0, q = r).
std::string Q8Rows(uint64_t cols, uint64_t rows) {
  std::string b;
  for (uint64_t r = 0; r < rows; ++r) {
    for (uint64_t blk = 0; blk < cols / 32; ++blk) {
      b += GgufEnc<uint16_t>(0x3c00);
      b += std::string(32, static_cast<char>(r));
    }
  }
  return b;
}

std::string WriteTiny(const TinyOptions& o) {
  GgufTestWriter w;
  const std::string a = o.arch;
  w.AddString("general.architecture", a);
  w.AddU32(a + ".block_count", kLayers);
  w.AddU32(a + ".embedding_length", kHidden);
  w.AddU32(a + ".feed_forward_length", kFfn);
  w.AddU32(a + ".attention.head_count", kHeads);
  w.AddU32(a + ".attention.head_count_kv", kKvHeads);
  w.AddU32(a + ".context_length", 2048);
  w.AddF32(a + ".attention.layer_norm_rms_epsilon", 1e-6f);
  w.AddF32(a + ".rope.freq_base", 500000.0f);
  w.AddString("tokenizer.ggml.model", "gpt2");
  w.AddString("tokenizer.ggml.pre", "smollm");
  w.AddStringArray("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "hello", "<|im_end|>",
                                             "<|endoftext|>", "world", "<|eot_id|>"});
  w.AddArray<int32_t>("tokenizer.ggml.token_type", GgufType::kInt32, {2, 3, 3, 1, 3, 1, 1, 3});
  w.AddArray<float>("tokenizer.ggml.scores", GgufType::kFloat32,
                    {0, -1, -2, -3, -4, -5, -6, -7});
  w.AddStringArray("tokenizer.ggml.merges", {"h e", "he llo"});
  w.AddU32("tokenizer.ggml.bos_token_id", 1);
  w.AddU32("tokenizer.ggml.eos_token_id", 2);
  w.AddU32("tokenizer.ggml.unknown_token_id", 0);
  w.AddU32("tokenizer.ggml.padding_token_id", 2);
  w.AddU32("tokenizer.ggml.eot_token_id", 6);
  w.AddBool("tokenizer.ggml.add_bos_token", true);
  w.AddString("tokenizer.chat_template", "{{ messages }}");
  if (o.meta) o.meta(w);

  auto shape = [&](const std::string& name, std::vector<uint64_t> ne) {
    auto it = o.shapes.find(name);
    return it == o.shapes.end() ? ne : it->second;
  };
  auto f32 = [&](const std::string& name, std::vector<uint64_t> ne) {
    if (!o.skip.count(name)) w.AddF32Tensor(name, shape(name, ne), 1.0f);
  };
  auto f16 = [&](const std::string& name, std::vector<uint64_t> ne) {
    if (o.skip.count(name)) return;
    ne = shape(name, ne);
    uint64_t n = 1;
    for (uint64_t d : ne) n *= d;
    w.AddTensor(name, DType::kF16, ne, std::string(2 * n, '\0'));
  };
  auto q8 = [&](const std::string& name, std::vector<uint64_t> ne) {
    if (o.skip.count(name)) return;
    ne = shape(name, ne);
    w.AddTensor(name, DType::kQ8_0, ne, Q8Rows(ne[0], ne.size() > 1 ? ne[1] : 1));
  };
  q8("token_embd.weight", {kHidden, kVocab});
  f32("output_norm.weight", {kHidden});
  if (o.output) q8("output.weight", {kHidden, kVocab});
  const uint64_t q = kHeads * kHeadDim, kv = kKvHeads * kHeadDim;
  for (uint64_t i = 0; i < kLayers; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    f32(b + "attn_norm.weight", {kHidden});
    f16(b + "attn_q.weight", {kHidden, q});
    q8(b + "attn_k.weight", {kHidden, kv});
    q8(b + "attn_v.weight", {kHidden, kv});
    q8(b + "attn_output.weight", {q, kHidden});
    if (o.biases) {
      f32(b + "attn_q.bias", {q});
      f32(b + "attn_k.bias", {kv});
      f32(b + "attn_v.bias", {kv});
    }
    f32(b + "ffn_norm.weight", {kHidden});
    q8(b + "ffn_gate.weight", {kHidden, kFfn});
    q8(b + "ffn_up.weight", {kHidden, kFfn});
    q8(b + "ffn_down.weight", {kFfn, kHidden});
  }
  static int counter = 0;
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("tiny_" + std::to_string(::getpid()) + "_" +
                             std::to_string(counter++) + ".gguf"))
                               .string();
  EXPECT_TRUE(GgufTestWriter::WriteFile(path, w.Serialize()));
  return path;
}

absl::StatusOr<Model> LoadTiny(const TinyOptions& o) {
  const std::string path = WriteTiny(o);
  absl::StatusOr<Model> m = LoadGgufModel(path);
  std::filesystem::remove(path);  // the mapping stays valid after unlink
  return m;
}

std::string ErrorOf(const TinyOptions& o) {
  absl::StatusOr<Model> m = LoadTiny(o);
  return m.ok() ? "OK" : std::string(m.status().message());
}

TEST(GgufModelLoader, TinyLlamaConfigWeightsAndTokenizer) {
  absl::StatusOr<Model> m = LoadTiny({});
  ASSERT_TRUE(m.ok()) << m.status();
  const ModelConfig& c = m->config;
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.n_layers, 2);
  EXPECT_EQ(c.hidden, 64);
  EXPECT_EQ(c.n_heads, 4);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.rope_dim, 16);
  EXPECT_EQ(c.ffn_hidden, 96);
  EXPECT_EQ(c.vocab_size, 8);
  EXPECT_EQ(c.max_context, 2048);
  EXPECT_FLOAT_EQ(c.rms_eps, 1e-6f);
  EXPECT_FLOAT_EQ(c.rope_theta, 500000.0f);
  EXPECT_FALSE(c.rope_neox);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kNone);

  const ModelWeights& w = m->weights;
  EXPECT_EQ(w.token_embd.dtype, DType::kQ8_0);
  EXPECT_EQ(w.token_embd.rows, 8);
  EXPECT_EQ(w.token_embd.cols, 64);
  EXPECT_EQ(w.output.data, w.token_embd.data);  // tied
  EXPECT_EQ(w.output_norm.rows, 1);
  EXPECT_EQ(w.output_norm.cols, 64);
  EXPECT_EQ(w.rope_freq_factors.data, nullptr);
  ASSERT_EQ(w.layers.size(), 2u);
  const LayerWeights& l = w.layers[1];
  EXPECT_EQ(l.wq.dtype, DType::kF16);
  EXPECT_EQ(l.wq.rows, 64);
  EXPECT_EQ(l.wk.rows, 32);
  EXPECT_EQ(l.wk.cols, 64);
  EXPECT_EQ(l.wo.rows, 64);
  EXPECT_EQ(l.wo.cols, 64);
  EXPECT_EQ(l.w_gate.rows, 96);
  EXPECT_EQ(l.w_down.rows, 64);
  EXPECT_EQ(l.w_down.cols, 96);
  EXPECT_EQ(l.attn_norm.dtype, DType::kF32);
  EXPECT_EQ(static_cast<const float*>(l.ffn_norm.data)[63], 1.0f);
  EXPECT_EQ(l.bq.data, nullptr);
  // The views point at the right bytes: row r of the embedding dequantizes to r.
  float row[64];
  DequantizeRow(w.token_embd.dtype,
                static_cast<const uint8_t*>(w.token_embd.data) + 5 * RowBytes(DType::kQ8_0, 64),
                row, 64);
  EXPECT_EQ(row[0], 5.0f);
  EXPECT_EQ(row[63], 5.0f);

  const TokenizerSpec& t = m->tokenizer;
  EXPECT_EQ(t.model, "gpt2");
  EXPECT_EQ(t.pre, "smollm");
  ASSERT_EQ(t.tokens.size(), 8u);
  EXPECT_EQ(t.tokens[3], "hello");
  EXPECT_EQ(t.scores.size(), 8u);
  EXPECT_EQ(t.scores[7], -7.0f);
  ASSERT_EQ(t.types.size(), 8u);
  EXPECT_EQ(t.types[1], TokenType::kControl);
  EXPECT_EQ(t.types[0], TokenType::kUnknown);
  EXPECT_EQ(t.merges, (std::vector<std::string>{"h e", "he llo"}));
  EXPECT_EQ(t.bos_id, 1);
  EXPECT_EQ(t.eos_id, 2);
  EXPECT_EQ(t.unk_id, 0);
  EXPECT_EQ(t.pad_id, 2);
  EXPECT_TRUE(t.add_bos);
  EXPECT_FALSE(t.add_space_prefix);  // gpt2 default
  // eot_token_id first, then the control tokens by name; "<|endoftext|>" here is a normal
  // token, so it does not end a turn.
  EXPECT_EQ(t.eot_ids, (std::vector<int32_t>{6, 4, 7}));
  EXPECT_EQ(t.chat_template, "{{ messages }}");
  EXPECT_NE(m->storage, nullptr);
  EXPECT_NE(m->source.find("tiny_"), std::string::npos);
}

TEST(GgufModelLoader, Qwen2HasBiasesAndNeoxRope) {
  TinyOptions o;
  o.arch = "qwen2";
  o.biases = true;
  o.output = true;
  absl::StatusOr<Model> m = LoadTiny(o);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->config.rope_neox);
  EXPECT_TRUE(m->config.qkv_bias);
  EXPECT_FALSE(m->config.tied_embeddings);
  EXPECT_NE(m->weights.output.data, m->weights.token_embd.data);
  EXPECT_EQ(m->weights.layers[0].bq.cols, 64);
  EXPECT_EQ(m->weights.layers[0].bk.cols, 32);
  EXPECT_EQ(m->weights.layers[0].bv.rows, 1);

  o.skip = {"blk.1.attn_k.bias"};
  EXPECT_HAS(ErrorOf(o), "'blk.1.attn_k.bias' is missing");
}

TEST(GgufModelLoader, MistralAndOptionalKeys) {
  TinyOptions o;
  o.arch = "mistral";
  o.meta = [](GgufTestWriter& w) {
    w.AddU32("mistral.attention.key_length", 32);
    w.AddU32("mistral.rope.dimension_count", 24);
    w.AddString("mistral.rope.scaling.type", "linear");
    w.AddF32("mistral.rope.scaling.factor", 4.0f);
  };
  // key_length 32 doubles head_dim, so q/k/v/o change shape.
  o.shapes = {{"blk.0.attn_q.weight", {64, 128}}, {"blk.1.attn_q.weight", {64, 128}},
              {"blk.0.attn_k.weight", {64, 64}},  {"blk.1.attn_k.weight", {64, 64}},
              {"blk.0.attn_v.weight", {64, 64}},  {"blk.1.attn_v.weight", {64, 64}},
              {"blk.0.attn_output.weight", {128, 64}}, {"blk.1.attn_output.weight", {128, 64}}};
  absl::StatusOr<Model> m = LoadTiny(o);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->config.head_dim, 32);
  EXPECT_EQ(m->config.rope_dim, 24);
  EXPECT_FALSE(m->config.rope_neox);
  EXPECT_EQ(m->config.rope_scaling.type, RopeScaling::Type::kLinear);
  EXPECT_FLOAT_EQ(m->config.rope_scaling.factor, 4.0f);
}

TEST(GgufModelLoader, RopeFreqFactors) {
  TinyOptions o;
  o.meta = [](GgufTestWriter& w) { w.AddF32Tensor("rope_freqs.weight", {8}, 2.0f); };
  absl::StatusOr<Model> m = LoadTiny(o);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->weights.rope_freq_factors.cols, 8);
  EXPECT_EQ(static_cast<const float*>(m->weights.rope_freq_factors.data)[7], 2.0f);
  o.meta = [](GgufTestWriter& w) { w.AddF32Tensor("rope_freqs.weight", {5}, 2.0f); };
  EXPECT_HAS(ErrorOf(o), "'rope_freqs.weight' has shape [5], expected [1, 8]");
}

TEST(GgufModelLoader, ErrorsNameTheProblem) {
  TinyOptions o;
  o.arch = "gpt2";
  EXPECT_HAS(ErrorOf(o), "unsupported GGUF architecture 'gpt2'");

  o = {};
  o.skip = {"blk.1.ffn_up.weight"};
  EXPECT_HAS(ErrorOf(o), "GGUF tensor 'blk.1.ffn_up.weight' is missing");

  o = {};
  o.shapes = {{"blk.0.attn_k.weight", {64, 48}}};
  const std::string msg = ErrorOf(o);
  EXPECT_HAS(msg, "tensor 'blk.0.attn_k.weight' has shape [48, 64], expected [32, 64]");

  o = {};
  o.shapes = {{"blk.0.ffn_norm.weight", {64, 2}}};
  EXPECT_HAS(ErrorOf(o), "'blk.0.ffn_norm.weight' has shape [2, 64], expected [1, 64]");

  o = {};
  o.meta = [](GgufTestWriter& w) {
    w.AddString("llama.rope.scaling.type", "yarn");
    w.AddF32("llama.rope.scaling.factor", 4.0f);
  };
  EXPECT_HAS(ErrorOf(o), "unsupported RoPE scaling type 'yarn'");

  o = {};
  o.meta = [](GgufTestWriter& w) { w.AddU32("llama.vocab_size", 9); };
  EXPECT_HAS(ErrorOf(o), "llama.vocab_size = 9 but token_embd.weight has 8 rows");

  o = {};
  o.meta = [](GgufTestWriter& w) { w.AddU32("tokenizer.ggml.eot_token_id_x", 1); };
  EXPECT_EQ(ErrorOf(o), "OK");

  o = {};
  o.skip = {"output_norm.weight"};
  EXPECT_HAS(ErrorOf(o), "'output_norm.weight' is missing");

  absl::StatusOr<Model> none = LoadGgufModel("/nonexistent/model.gguf");
  EXPECT_HAS(std::string(none.status().message()), "/nonexistent/model.gguf");
}

TEST(GgufModelLoader, MissingConfigKeyIsNamed) {
  // Build a file without llama.feed_forward_length by writing one from scratch.
  GgufTestWriter w;
  w.AddString("general.architecture", "llama");
  w.AddU32("llama.block_count", 1);
  w.AddU32("llama.embedding_length", 64);
  w.AddU32("llama.attention.head_count", 4);
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("nokey_" + std::to_string(::getpid()) + ".gguf")).string();
  ASSERT_TRUE(GgufTestWriter::WriteFile(path, w.Serialize()));
  absl::StatusOr<Model> m = LoadGgufModel(path);
  std::filesystem::remove(path);
  EXPECT_HAS(std::string(m.status().message()), "'llama.feed_forward_length' is missing");
}

// ---- The real model -------------------------------------------------------------------

TEST(GgufModelLoader, SmolLm2) {
  const std::string path = testing::SmolLm2Path();
  ASSERT_TRUE(std::filesystem::exists(path)) << path << " missing: run scripts/fetch-model.sh";
  absl::StatusOr<Model> m = LoadGgufModel(path);
  ASSERT_TRUE(m.ok()) << m.status();
  const ModelConfig& c = m->config;
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.n_layers, 30);
  EXPECT_EQ(c.hidden, 576);
  EXPECT_EQ(c.n_heads, 9);
  EXPECT_EQ(c.n_kv_heads, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.rope_dim, 64);
  EXPECT_EQ(c.ffn_hidden, 1536);
  EXPECT_EQ(c.vocab_size, 49152);
  EXPECT_EQ(c.max_context, 8192);
  EXPECT_FLOAT_EQ(c.rope_theta, 100000.0f);
  EXPECT_FLOAT_EQ(c.rms_eps, 1e-5f);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_FALSE(c.rope_neox);
  EXPECT_FALSE(c.qkv_bias);

  const ModelWeights& w = m->weights;
  EXPECT_EQ(w.token_embd.dtype, DType::kQ8_0);
  EXPECT_EQ(w.output.data, w.token_embd.data);
  ASSERT_EQ(w.layers.size(), 30u);
  for (const LayerWeights& l : w.layers) {
    EXPECT_EQ(l.wq.dtype, DType::kQ4_1);
    EXPECT_EQ(l.wk.dtype, DType::kQ4_1);
    EXPECT_EQ(l.wv.dtype, DType::kQ4_1);
    EXPECT_EQ(l.wo.dtype, DType::kQ4_1);
    EXPECT_EQ(l.w_gate.dtype, DType::kQ4_1);
    EXPECT_EQ(l.w_up.dtype, DType::kQ4_1);
    EXPECT_EQ(l.w_down.dtype, DType::kQ4_1);
    EXPECT_EQ(l.attn_norm.dtype, DType::kF32);
  }
  EXPECT_EQ(w.layers[0].wk.rows, 192);
  EXPECT_EQ(w.layers[0].w_down.cols, 1536);

  const TokenizerSpec& t = m->tokenizer;
  EXPECT_EQ(t.model, "gpt2");
  EXPECT_EQ(t.pre, "smollm");
  EXPECT_EQ(t.tokens.size(), 49152u);
  EXPECT_EQ(t.types.size(), 49152u);
  EXPECT_EQ(t.merges.size(), 48900u);
  EXPECT_EQ(t.merges[0], "\xc4\xa0 t");  // "Ġ t"
  EXPECT_EQ(t.tokens[2], "<|im_end|>");
  EXPECT_EQ(t.bos_id, 1);
  EXPECT_EQ(t.eos_id, 2);
  EXPECT_EQ(t.unk_id, 0);
  EXPECT_EQ(t.pad_id, 2);
  EXPECT_FALSE(t.add_bos);
  EXPECT_FALSE(t.add_space_prefix);
  EXPECT_EQ(t.eot_ids, (std::vector<int32_t>{2, 0}));  // <|im_end|>, <|endoftext|>
  EXPECT_NE(t.chat_template.find("<|im_start|>"), std::string::npos);

  // token_embd rows 0 and 1000, first 64 values, against gguf-py's dequantization.
  std::ifstream g(testing::SourcePath("tests/golden/dequant/smollm2_token_embd.bin"),
                  std::ios::binary);
  const std::string s((std::istreambuf_iterator<char>(g)), {});
  ASSERT_EQ(s.size(), 8u + 128 * 4);
  std::vector<float> want(128);
  std::memcpy(want.data(), s.data() + 8, 128 * 4);
  const int rows[2] = {0, 1000};
  for (int r = 0; r < 2; ++r) {
    std::vector<float> row(576);
    DequantizeRow(w.token_embd.dtype,
                  static_cast<const uint8_t*>(w.token_embd.data) +
                      rows[r] * RowBytes(w.token_embd.dtype, 576),
                  row.data(), 576);
    for (int i = 0; i < 64; ++i) ASSERT_EQ(row[i], want[r * 64 + i]) << "row " << rows[r] << " col " << i;
  }
}

}  // namespace
}  // namespace kvserve
