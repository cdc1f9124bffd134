// Everything a tokenizer needs, as read from a model file (GGUF metadata or tokenizer.json).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace kvserve {

// GGUF tokenizer.ggml.token_type values.
enum class TokenType : int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct TokenizerSpec {
  std::string model;                // "gpt2" (byte-level BPE) or "llama" (SentencePiece BPE)
  std::string pre;                  // pre-tokenizer: "smollm", "gpt2", "llama-bpe", "qwen2", ...
  std::vector<std::string> tokens;  // id -> token text (byte-level encoded for gpt2)
  std::vector<float> scores;        // SentencePiece scores; empty for gpt2
  std::vector<TokenType> types;     // empty means all normal
  std::vector<std::string> merges;  // "a b" pairs, rank = index
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t unk_id = -1;
  int32_t pad_id = -1;
  std::vector<int32_t> eot_ids;     // extra end-of-turn ids (e.g. <|eot_id|>, <|im_end|>)
  bool add_bos = false;
  bool add_space_prefix = false;
  std::string chat_template;        // Jinja source as shipped; we recognize known families
};

}  // namespace kvserve
