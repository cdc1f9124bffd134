// Llama-family forward pass over a batch of sequences, on any Backend.
#pragma once
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/model/model_weights.h"
#include "kernels/backend.h"

namespace kvserve {

// Logits [tokens.size(), vocab] at every position of one sequence run with a full cache
// from position 0. For tests and tools; the engine uses the batched API.
absl::StatusOr<std::vector<float>> ComputeAllLogits(const Model& model, Backend& backend,
                                                    absl::Span<const int32_t> tokens);

}  // namespace kvserve
