// MakeRandomModel: preset shapes, determinism per seed, weight scale, tokenizer.
#include "engine/model/random_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "engine/model/model_loader.h"

namespace kvserve {
namespace {

bool SameBytes(const WeightView& a, const WeightView& b) {
  return a.dtype == b.dtype && a.rows == b.rows && a.cols == b.cols &&
         std::memcmp(a.data, b.data, RowBytes(a.dtype, a.cols) * a.rows) == 0;
}

const float* F(const WeightView& w) { return static_cast<const float*>(w.data); }

TEST(RandomModelTest, TinyShapes) {
  auto m = MakeRandomModel("tiny", 7);
  ASSERT_TRUE(m.ok()) << m.status();
  const ModelConfig& c = m->config;
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.n_layers, 2);
  EXPECT_EQ(c.hidden, 64);
  EXPECT_EQ(c.n_heads, 4);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.rope_dim, 16);
  EXPECT_EQ(c.ffn_hidden, 128);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.max_context, 4096);
  EXPECT_FLOAT_EQ(c.rope_theta, 10000.0f);
  EXPECT_TRUE(c.rope_neox);
  EXPECT_EQ(m->source, "random:tiny:7");
  ASSERT_EQ(m->weights.layers.size(), 2u);
  const LayerWeights& l = m->weights.layers[1];
  EXPECT_EQ(l.wq.dtype, DType::kF32);
  EXPECT_EQ(l.wq.rows, 64);
  EXPECT_EQ(l.wk.rows, 32);
  EXPECT_EQ(l.wv.rows, 32);
  EXPECT_EQ(l.wo.cols, 64);
  EXPECT_EQ(l.w_gate.rows, 128);
  EXPECT_EQ(l.w_down.cols, 128);
  EXPECT_EQ(m->weights.token_embd.rows, 512);
  EXPECT_NE(m->weights.output.data, m->weights.token_embd.data);
  for (int64_t i = 0; i < 64; ++i) EXPECT_EQ(F(l.attn_norm)[i], 1.0f);
  EXPECT_EQ(F(m->weights.output_norm)[63], 1.0f);
}

TEST(RandomModelTest, WeightScale) {
  auto m = MakeRandomModel("tiny", 1);
  ASSERT_TRUE(m.ok()) << m.status();
  const WeightView& w = m->weights.layers[0].w_down;  // cols = 128
  const float bound = std::sqrt(3.0f / 128.0f);
  double sum = 0, sum2 = 0;
  const int64_t n = w.rows * w.cols;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_LE(std::fabs(F(w)[i]), bound);
    sum += F(w)[i];
    sum2 += F(w)[i] * F(w)[i];
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(std::sqrt(sum2 / n), 1.0 / std::sqrt(128.0), 0.01);  // unit gain per layer
}

TEST(RandomModelTest, DeterministicPerSeedDifferentAcrossSeeds) {
  auto a = MakeRandomModel("tiny", 42);
  auto b = MakeRandomModel("tiny", 42);
  auto c = MakeRandomModel("tiny", 43);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_TRUE(SameBytes(a->weights.token_embd, b->weights.token_embd));
  EXPECT_TRUE(SameBytes(a->weights.output, b->weights.output));
  for (size_t l = 0; l < a->weights.layers.size(); ++l) {
    const LayerWeights& x = a->weights.layers[l];
    const LayerWeights& y = b->weights.layers[l];
    EXPECT_TRUE(SameBytes(x.wq, y.wq) && SameBytes(x.wk, y.wk) && SameBytes(x.wv, y.wv) &&
                SameBytes(x.wo, y.wo) && SameBytes(x.w_gate, y.w_gate) && SameBytes(x.w_up, y.w_up) &&
                SameBytes(x.w_down, y.w_down));
  }
  EXPECT_FALSE(SameBytes(a->weights.token_embd, c->weights.token_embd));
  EXPECT_FALSE(SameBytes(a->weights.layers[0].wq, c->weights.layers[0].wq));
  // Different tensors of one model are not copies of each other.
  EXPECT_NE(F(a->weights.layers[0].wq)[0], F(a->weights.layers[1].wq)[0]);
  EXPECT_NE(F(a->weights.layers[0].wk)[0], F(a->weights.layers[0].wv)[0]);
}

TEST(RandomModelTest, LoadModelSpec) {
  auto m = LoadModel("random:tiny:5");
  ASSERT_TRUE(m.ok()) << m.status();
  auto direct = MakeRandomModel("tiny", 5);
  ASSERT_TRUE(direct.ok());
  EXPECT_TRUE(SameBytes(m->weights.layers[0].wq, direct->weights.layers[0].wq));
}

TEST(RandomModelTest, UnknownPresetListsKnownOnes) {
  auto m = MakeRandomModel("gpt5", 0);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(m.status().message());
  EXPECT_NE(msg.find("'gpt5'"), std::string::npos) << msg;
  for (const std::string& p : RandomModelPresets()) EXPECT_NE(msg.find(p), std::string::npos) << msg;
}

// The big presets are checked through their config only: building them allocates the weights
// (0.5 GB for smollm2-135m, 16 GB for llama3-8b).
TEST(RandomModelTest, BigPresetShapes) {
  auto s = RandomPresetConfig("smollm2-135m");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->n_layers, 30);
  EXPECT_EQ(s->hidden, 576);
  EXPECT_EQ(s->n_heads, 9);
  EXPECT_EQ(s->n_kv_heads, 3);
  EXPECT_EQ(s->head_dim, 64);
  EXPECT_EQ(s->ffn_hidden, 1536);
  EXPECT_EQ(s->vocab_size, 49152);
  EXPECT_FLOAT_EQ(s->rope_theta, 100000.0f);
  EXPECT_TRUE(s->tied_embeddings);
  auto l = RandomPresetConfig("llama3-8b");
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->n_layers, 32);
  EXPECT_EQ(l->hidden, 4096);
  EXPECT_EQ(l->n_heads, 32);
  EXPECT_EQ(l->n_kv_heads, 8);
  EXPECT_EQ(l->head_dim, 128);
  EXPECT_EQ(l->ffn_hidden, 14336);
  EXPECT_EQ(l->vocab_size, 128256);
  EXPECT_FLOAT_EQ(l->rope_theta, 500000.0f);
  EXPECT_EQ(l->rope_scaling.type, RopeScaling::Type::kLlama3);
  EXPECT_FLOAT_EQ(l->rope_scaling.factor, 8.0f);
  EXPECT_FLOAT_EQ(l->rope_scaling.low_freq_factor, 1.0f);
  EXPECT_FLOAT_EQ(l->rope_scaling.high_freq_factor, 4.0f);
  EXPECT_EQ(l->rope_scaling.original_max_positions, 8192);
  EXPECT_FALSE(l->tied_embeddings);
}

TEST(RandomModelTest, ByteLevelTokenizer) {
  TokenizerSpec t = RandomModelTokenizer(512);
  EXPECT_EQ(t.model, "gpt2");
  ASSERT_EQ(t.tokens.size(), 512u);
  ASSERT_EQ(t.types.size(), 512u);
  EXPECT_EQ(t.tokens['A'], "A");
  EXPECT_EQ(t.tokens['!'], "!");
  EXPECT_EQ(t.tokens[' '], "\xC4\xA0");   // U+0120 'Ġ'
  EXPECT_EQ(t.tokens['\n'], "\xC4\x8A");  // U+010A 'Ċ'
  EXPECT_EQ(t.tokens[0], "\xC4\x80");     // U+0100
  EXPECT_EQ(t.tokens[0xAD], "\xC5\x83");  // soft hyphen: the last remapped byte, U+0143
  EXPECT_EQ(t.tokens[0xFF], "\xC3\xBF");  // printable Latin-1 maps to itself
  EXPECT_TRUE(t.merges.empty());
  EXPECT_EQ(t.bos_id, 256);
  EXPECT_EQ(t.eos_id, 257);
  EXPECT_EQ(t.tokens[256], "<s>");
  EXPECT_EQ(t.tokens[257], "</s>");
  EXPECT_EQ(t.types[256], TokenType::kControl);
  EXPECT_EQ(t.tokens[511], "<unused_511>");
  EXPECT_EQ(t.types[511], TokenType::kUnused);
}

}  // namespace
}  // namespace kvserve
