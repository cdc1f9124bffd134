// Loading a Model from a GGUF file, a Hugging Face folder, or a random preset.
#pragma once
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "engine/model/model_weights.h"

namespace kvserve {

// GGUF v2/v3 file, mmapped; weights keep their stored type.
absl::StatusOr<Model> LoadGgufModel(const std::string& path);

// Folder with config.json + model.safetensors (or sharded with model.safetensors.index.json)
// and tokenizer.json. Weights in bf16/f16/f32.
absl::StatusOr<Model> LoadHfModel(const std::string& dir);

// Deterministic random weights of a known shape. Presets: tiny, smollm2-135m, llama3-8b.
absl::StatusOr<Model> MakeRandomModel(const std::string& preset, uint64_t seed);

// Dispatches on the spec: "random:<preset>[:seed]", a folder (HF), or a .gguf file.
absl::StatusOr<Model> LoadModel(const std::string& spec);

}  // namespace kvserve
