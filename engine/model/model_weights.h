// The tensors of a loaded Llama-family model, as views into storage the model owns.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/model/model_config.h"
#include "engine/tokenizer/tokenizer_spec.h"
#include "kernels/backend.h"

namespace kvserve {

struct LayerWeights {
  WeightView attn_norm;             // [1, hidden] F32
  WeightView wq, wk, wv, wo;        // [n_heads*head_dim, hidden], [n_kv*hd, hidden] x2, [hidden, n_heads*hd]
  WeightView bq, bk, bv;            // [1, out] F32, only when config.qkv_bias
  WeightView ffn_norm;              // [1, hidden] F32
  WeightView w_gate, w_up;          // [ffn_hidden, hidden]
  WeightView w_down;                // [hidden, ffn_hidden]
};

struct ModelWeights {
  WeightView token_embd;            // [vocab, hidden]
  std::vector<LayerWeights> layers;
  WeightView output_norm;           // [1, hidden] F32
  WeightView output;                // [vocab, hidden]; == token_embd when tied
  // Optional [1, rope_dim/2] F32 divisors of the RoPE frequencies (GGUF "rope_freqs.weight",
  // written for Llama-3.1-style scaling); empty (data == nullptr) otherwise.
  WeightView rope_freq_factors;
};

// A model ready to run: config, weights, tokenizer data. `storage` keeps the memory behind
// every WeightView alive (an mmap of the file, or owned buffers).
struct Model {
  ModelConfig config;
  ModelWeights weights;
  TokenizerSpec tokenizer;
  std::string source;               // path or "random:<preset>"
  std::shared_ptr<const void> storage;
};

}  // namespace kvserve
