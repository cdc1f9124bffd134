// Shape and hyper-parameters of a Llama-family model, independent of the file format.
#pragma once
#include <cstdint>
#include <string>

namespace kvserve {

struct RopeScaling {
  enum class Type { kNone, kLinear, kLlama3 };
  Type type = Type::kNone;
  float factor = 1.0f;
  float low_freq_factor = 1.0f;         // llama3
  float high_freq_factor = 4.0f;        // llama3
  int64_t original_max_positions = 0;   // llama3: original_max_position_embeddings
};

struct ModelConfig {
  std::string architecture;  // "llama", "qwen2", "mistral"
  int64_t n_layers = 0;
  int64_t hidden = 0;        // embedding width
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t ffn_hidden = 0;
  int64_t vocab_size = 0;
  int64_t max_context = 0;   // trained context length
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  int64_t rope_dim = 0;      // rotated dims per head (== head_dim for these models)
  // GGUF "llama" stores Q/K rows permuted for adjacent-pair rotation; HF checkpoints and
  // GGUF qwen2 use the half-split (neox) pairing.
  bool rope_neox = false;
  RopeScaling rope_scaling;
  bool tied_embeddings = false;
  bool qkv_bias = false;     // Qwen2
};

}  // namespace kvserve
