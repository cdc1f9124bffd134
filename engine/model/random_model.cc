// MakeRandomModel: deterministic random weights for a preset shape. Each element is a hash
// of (seed, tensor index, element index) -- a counter-based generator rather than a
// <random> distribution, so the values are identical across standard libraries, thread
// counts and fill order.
#include "engine/model/random_model.h"

#include <cmath>
#include <deque>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/model/model_loader.h"
#include "engine/model/safetensors_file.h"
#include "engine/model/split_mix64.h"

namespace kvserve {
namespace {

// Uniform in [-1, 1) from 24 random bits (exact in float).
float UniformPm1(uint64_t key, uint64_t i) {
  uint64_t h = SplitMix64(key ^ SplitMix64(i));
  return static_cast<float>(static_cast<int64_t>(h >> 40) - (int64_t{1} << 23)) *
         (1.0f / static_cast<float>(int64_t{1} << 23));
}

// Owned buffers behind the views; deque so earlier buffers never move.
struct RandomStorage {
  std::deque<std::vector<float>> f32;
  std::deque<std::vector<uint16_t>> bf16;
};

class Filler {
 public:
  Filler(uint64_t seed, DType matrix_dtype, RandomStorage* s)
      : seed_(seed), dtype_(matrix_dtype), storage_(s) {}

  // Uniform(-1, 1) * sqrt(3) / sqrt(cols): unit-variance inputs give unit-variance outputs.
  WeightView Matrix(int64_t rows, int64_t cols) {
    const uint64_t key = SplitMix64(seed_ * 0x100000001b3ull + next_tensor_++);
    const float scale = std::sqrt(3.0f) / std::sqrt(static_cast<float>(cols));
    const int64_t n = rows * cols;
    if (dtype_ == DType::kBF16) {
      std::vector<uint16_t>& buf = storage_->bf16.emplace_back(static_cast<size_t>(n));
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i) buf[i] = F32ToBf16(UniformPm1(key, i) * scale);
      return WeightView{DType::kBF16, rows, cols, buf.data()};
    }
    std::vector<float>& buf = storage_->f32.emplace_back(static_cast<size_t>(n));
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) buf[i] = UniformPm1(key, i) * scale;
    return WeightView{DType::kF32, rows, cols, buf.data()};
  }

  // Norm gains: all ones, so the model's scale comes from the matrices alone.
  WeightView Ones(int64_t n) {
    std::vector<float>& buf = storage_->f32.emplace_back(static_cast<size_t>(n), 1.0f);
    return WeightView{DType::kF32, 1, n, buf.data()};
  }

 private:
  uint64_t seed_;
  DType dtype_;
  RandomStorage* storage_;
  uint64_t next_tensor_ = 0;
};

// GPT-2's printable stand-ins for bytes: printable Latin-1 bytes map to themselves, the rest
// to U+0100 onwards in byte order.
std::string ByteToken(int b) {
  int cp;
  if ((b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff)) {
    cp = b;
  } else {
    int n = 0;
    for (int x = 0; x < b; ++x) {
      bool printable = (x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || (x >= 0xae && x <= 0xff);
      if (!printable) ++n;
    }
    cp = 256 + n;
  }
  std::string s;
  if (cp < 0x80) {
    s.push_back(static_cast<char>(cp));
  } else {  // all code points here are < 0x800: two UTF-8 bytes
    s.push_back(static_cast<char>(0xc0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
  return s;
}

}  // namespace

std::vector<std::string> RandomModelPresets() { return {"tiny", "smollm2-135m", "llama3-8b"}; }

absl::StatusOr<ModelConfig> RandomPresetConfig(const std::string& preset) {
  ModelConfig c;
  c.architecture = "llama";
  c.rope_neox = true;
  c.rms_eps = 1e-5f;
  if (preset == "tiny") {
    c.n_layers = 2;
    c.hidden = 64;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.ffn_hidden = 128;
    c.vocab_size = 512;
    c.max_context = 4096;
    c.rope_theta = 10000.0f;
  } else if (preset == "smollm2-135m") {
    c.n_layers = 30;
    c.hidden = 576;
    c.n_heads = 9;
    c.n_kv_heads = 3;
    c.ffn_hidden = 1536;
    c.vocab_size = 49152;
    c.max_context = 8192;
    c.rope_theta = 100000.0f;
    c.tied_embeddings = true;
  } else if (preset == "llama3-8b") {
    c.n_layers = 32;
    c.hidden = 4096;
    c.n_heads = 32;
    c.n_kv_heads = 8;
    c.ffn_hidden = 14336;
    c.vocab_size = 128256;
    c.max_context = 131072;
    c.rope_theta = 500000.0f;
    c.rope_scaling.type = RopeScaling::Type::kLlama3;
    c.rope_scaling.factor = 8.0f;
    c.rope_scaling.low_freq_factor = 1.0f;
    c.rope_scaling.high_freq_factor = 4.0f;
    c.rope_scaling.original_max_positions = 8192;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown random model preset '", preset,
                                                   "' (known: ", absl::StrJoin(RandomModelPresets(), ", "),
                                                   ")"));
  }
  c.head_dim = c.hidden / c.n_heads;
  c.rope_dim = c.head_dim;
  return c;
}

TokenizerSpec RandomModelTokenizer(int64_t vocab_size) {
  TokenizerSpec t;
  t.model = "gpt2";
  t.pre = "gpt2";
  for (int b = 0; b < 256; ++b) t.tokens.push_back(ByteToken(b));
  t.types.assign(256, TokenType::kNormal);
  t.bos_id = static_cast<int32_t>(t.tokens.size());
  t.tokens.push_back("<s>");
  t.types.push_back(TokenType::kControl);
  t.eos_id = static_cast<int32_t>(t.tokens.size());
  t.tokens.push_back("</s>");
  t.types.push_back(TokenType::kControl);
  for (int64_t i = static_cast<int64_t>(t.tokens.size()); i < vocab_size; ++i) {
    t.tokens.push_back(absl::StrCat("<unused_", i, ">"));
    t.types.push_back(TokenType::kUnused);
  }
  t.add_bos = true;
  return t;
}

absl::StatusOr<Model> MakeRandomModel(const std::string& preset, uint64_t seed) {
  absl::StatusOr<ModelConfig> config = RandomPresetConfig(preset);
  if (!config.ok()) return config.status();
  Model model;
  model.config = *config;
  model.source = absl::StrCat("random:", preset, ":", seed);
  const ModelConfig& c = model.config;
  auto storage = std::make_shared<RandomStorage>();
  // 8B parameters are 32 GB in F32; BF16 halves that and is what the real model ships in.
  Filler fill(seed, preset == "llama3-8b" ? DType::kBF16 : DType::kF32, storage.get());
  ModelWeights& w = model.weights;
  // Embedding rows at the same 1/sqrt(hidden) scale, so tied logits stay O(1) as well.
  w.token_embd = fill.Matrix(c.vocab_size, c.hidden);
  const int64_t q_out = c.n_heads * c.head_dim, kv_out = c.n_kv_heads * c.head_dim;
  w.layers.resize(static_cast<size_t>(c.n_layers));
  for (LayerWeights& l : w.layers) {
    l.attn_norm = fill.Ones(c.hidden);
    l.wq = fill.Matrix(q_out, c.hidden);
    l.wk = fill.Matrix(kv_out, c.hidden);
    l.wv = fill.Matrix(kv_out, c.hidden);
    l.wo = fill.Matrix(c.hidden, q_out);
    l.ffn_norm = fill.Ones(c.hidden);
    l.w_gate = fill.Matrix(c.ffn_hidden, c.hidden);
    l.w_up = fill.Matrix(c.ffn_hidden, c.hidden);
    l.w_down = fill.Matrix(c.hidden, c.ffn_hidden);
  }
  w.output_norm = fill.Ones(c.hidden);
  w.output = c.tied_embeddings ? w.token_embd : fill.Matrix(c.vocab_size, c.hidden);
  model.tokenizer = RandomModelTokenizer(c.vocab_size);
  model.storage = storage;
  return model;
}

}  // namespace kvserve
