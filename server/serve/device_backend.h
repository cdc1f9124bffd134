// `--device auto|cpu|cuda`: picks the compute backend of a kvserve command.
#pragma once
#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/model/model_weights.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/backend.h"

namespace kvserve {

// cpu: the CPU backend. cuda: the CUDA backend, or FAILED_PRECONDITION naming why there is
// none (no device, or a build without CUDA). auto: CUDA when a device is present, otherwise
// the CPU backend with a line on stderr saying why. Anything else: INVALID_ARGUMENT.
// kBatchInvariant (--deterministic) is a CPU backend mode: with cuda it is FAILED_PRECONDITION,
// and auto then means cpu.
absl::StatusOr<std::unique_ptr<Backend>> MakeBackendForDevice(std::string_view device,
                                                              Determinism determinism = Determinism::kFastest);

// A device backend uploads weights on their first use; this runs one forward step so they are
// in device memory before the KV pool is sized, and a fractional --kv-memory (a share of the
// memory free then) leaves room for them. A no-op on host-memory backends.
absl::Status UploadWeights(const Model& model, const Tokenizer& tokenizer, Backend& backend);

}  // namespace kvserve
