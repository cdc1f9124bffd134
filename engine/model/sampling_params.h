// Per-request token sampling settings and their validation. Semantics follow
// HF transformers / llama.cpp so that clients moving from those get the same behaviour.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kvserve {

struct SamplingParams {
  float temperature = 0.0f;         // 0 => greedy (argmax, ties -> lowest token id)
  int32_t top_k = 0;                // 0 => off; values above the vocab size act as off
  float top_p = 1.0f;               // nucleus mass in (0, 1]; 1 => off
  float min_p = 0.0f;               // in [0, 1]; drop tokens with p < min_p * p_max
  float repetition_penalty = 1.0f;  // HF/CTRL style; 1 => off
  float presence_penalty = 0.0f;    // OpenAI style; 0 => off
  float frequency_penalty = 0.0f;   // OpenAI style; 0 => off
  uint64_t seed = 0;                // PRNG seed; 0 is an ordinary seed, not "random"
};

// Returns InvalidArgument naming the offending field and its value, so an API error
// tells the client exactly what to fix. vocab_size must be positive.
inline absl::Status ValidateSamplingParams(const SamplingParams& p, int32_t vocab_size) {
  auto bad = [](const char* field, const char* rule, auto value) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling: ", field, " must be ", rule, ", got ", value));
  };
  if (vocab_size <= 0) return bad("vocab_size", "> 0", vocab_size);
  // Comparisons are written so that NaN fails them.
  if (!(std::isfinite(p.temperature) && p.temperature >= 0.0f))
    return bad("temperature", "finite and >= 0", p.temperature);
  if (p.top_k < 0) return bad("top_k", ">= 0 (0 disables it)", p.top_k);
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return bad("top_p", "in (0, 1]", p.top_p);
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) return bad("min_p", "in [0, 1]", p.min_p);
  if (!(std::isfinite(p.repetition_penalty) && p.repetition_penalty > 0.0f))
    return bad("repetition_penalty", "finite and > 0", p.repetition_penalty);
  if (!std::isfinite(p.presence_penalty))
    return bad("presence_penalty", "finite", p.presence_penalty);
  if (!std::isfinite(p.frequency_penalty))
    return bad("frequency_penalty", "finite", p.frequency_penalty);
  return absl::OkStatus();
}

}  // namespace kvserve
