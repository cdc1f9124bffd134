// Hugging Face config.json -> ModelConfig for the Llama family (Llama, SmolLM2, Qwen2,
// Mistral). Reads both the transformers v4 layout (rope_theta + rope_scaling) and the v5
// layout (rope_parameters).
#pragma once
#include <string>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"

namespace kvserve {

// Parses config.json text. Errors name the unsupported architecture / bad field.
absl::StatusOr<ModelConfig> ParseHfConfig(const std::string& json_text);

// Reads and parses the file at `path`.
absl::StatusOr<ModelConfig> LoadHfConfig(const std::string& path);

}  // namespace kvserve
