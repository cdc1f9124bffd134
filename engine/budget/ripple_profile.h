// A RippleKV sensitivity profile: per layer, how much the model's next-token distribution
// moves when that layer's value cache is perturbed (kvserve profile makes it). Tied to one
// model by a fingerprint, so a profile made for another model is refused.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_weights.h"

namespace kvserve {

struct RippleProfile {
  // The model it was measured on.
  std::string architecture;
  int64_t n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
  std::string fingerprint;  // ModelFingerprint()
  // How it was measured.
  std::vector<std::string> calibration_files;
  int64_t samples = 0, max_tokens = 0, scored_tokens = 0;
  double perturbation_scale = 0;
  uint64_t seed = 0;
  double seconds = 0;
  // s_l: mean KL(reference || perturbed) over the calibration set, per layer.
  std::vector<double> sensitivity;
};

// 16 hex digits: a hash of the architecture, shapes and tensor types of every weight, and
// of a sample of each layer's value-projection bytes (so same-shape checkpoints differ).
std::string ModelFingerprint(const Model& model);

absl::Status SaveRippleProfile(const RippleProfile& profile, const std::string& path);
// NOT_FOUND / INVALID_ARGUMENT naming the path and the problem.
absl::StatusOr<RippleProfile> LoadRippleProfile(const std::string& path);
// FAILED_PRECONDITION saying which model the profile was made for when it is not this one.
absl::Status CheckProfileMatchesModel(const RippleProfile& profile, const Model& model);
// LoadRippleProfile then CheckProfileMatchesModel: a profile ready to drive this model's plan.
absl::StatusOr<std::shared_ptr<const RippleProfile>> LoadRippleProfileFor(const std::string& path,
                                                                          const Model& model);

}  // namespace kvserve
