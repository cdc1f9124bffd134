// Hugging Face tokenizer.json (+ tokenizer_config.json) -> TokenizerSpec, the same data a
// GGUF file carries, so one tokenizer implementation serves both formats.
#pragma once
#include <string>

#include "absl/status/statusor.h"
#include "engine/tokenizer/tokenizer_spec.h"

namespace kvserve {

// Reads a BPE tokenizer.json: vocab, merges ("a b" or ["a", "b"]), added tokens (special ->
// kControl, others kUserDefined), byte-level ("gpt2") vs SentencePiece-style ("llama":
// Metaspace / byte_fallback), and the pre-tokenizer family ("smollm", "llama-bpe", "qwen2",
// "gpt2") guessed from the pre_tokenizer. bos/eos/unk/pad, add_bos and the chat template
// come from tokenizer_config.json when its path is non-empty (a sibling chat_template.jinja,
// as newer transformers write, is also read); otherwise they are guessed from well-known
// special token texts.
absl::StatusOr<TokenizerSpec> TokenizerSpecFromHfJson(const std::string& tokenizer_json_path,
                                                      const std::string& tokenizer_config_json_path_or_empty);

}  // namespace kvserve
