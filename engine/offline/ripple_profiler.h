// The RippleKV profiler: how much the next-token distribution moves when one layer's value
// cache is perturbed. For each calibration sample the context is prefilled once with the
// full cache; the reference distributions come from teacher-forcing the last scored_tokens
// tokens. Then, for each layer l, that layer's cached values (context only; keys and every
// other layer exact) get Gaussian noise with std = perturbation_scale x the per-head RMS of
// its values, the scored tokens run again, and s_l is the mean KL(reference || perturbed)
// over the scored positions and the samples.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/model/model_weights.h"
#include "kernels/backend.h"

namespace kvserve {

struct ProfilerOptions {
  int64_t scored_tokens = 32;        // positions whose distributions are compared
  double perturbation_scale = 0.5;   // noise std relative to each head's value RMS
  uint64_t seed = 0;
  int64_t prefill_chunk = 512;
};

// s_l per layer, finite and >= 0. Every sample must be longer than scored_tokens.
// progress(sample_index) is called after each sample.
absl::StatusOr<std::vector<double>> MeasureLayerSensitivity(
    const Model& model, Backend& backend, absl::Span<const std::vector<int32_t>> samples,
    const ProfilerOptions& options, const std::function<void(int64_t)>& progress = {});

}  // namespace kvserve
