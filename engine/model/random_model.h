// Random-weight model presets: shapes of real models without their weights, for tests,
// benchmarks and the CLI (`--model random:<preset>[:seed]`). MakeRandomModel is declared in
// model_loader.h; these helpers expose the pieces without allocating the weights.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "engine/tokenizer/tokenizer_spec.h"

namespace kvserve {

// "tiny", "smollm2-135m", "llama3-8b".
std::vector<std::string> RandomModelPresets();

// The preset's shape; InvalidArgument naming the preset and listing the known ones.
absl::StatusOr<ModelConfig> RandomPresetConfig(const std::string& preset);

// Byte-level "gpt2" tokenizer: the 256 GPT-2 byte tokens (ids 0..255), no merges, "<s>" (256,
// bos) and "</s>" (257, eos) control tokens, "<unused_N>" up to vocab_size.
TokenizerSpec RandomModelTokenizer(int64_t vocab_size);

}  // namespace kvserve
