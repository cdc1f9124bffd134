// Picks the next token from a row of logits: penalties, then greedy or
// temperature / top-k / top-p / min-p followed by a seeded, library-independent draw.
#pragma once
#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "engine/model/sampling_params.h"

namespace kvserve {

class Sampler {
 public:
  // params should have passed ValidateSamplingParams; the PRNG is seeded from params.seed,
  // so one Sampler per sequence gives a reproducible token stream.
  explicit Sampler(const SamplingParams& params);

  // logits: one value per vocab entry (-inf masks a token, NaN is treated as -inf).
  // previous_tokens: prompt + generated so far; repetition, presence and frequency
  // penalties all count occurrences over this whole span (pass a window to limit them);
  // ids outside [0, logits.size()) are ignored. Returns -1 only for empty logits.
  int32_t Sample(absl::Span<const float> logits, absl::Span<const int32_t> previous_tokens);

 private:
  struct Candidate {
    int32_t id;
    float logit;  // after penalties
    double w;     // exp((logit - max) / T), an unnormalised probability
  };

  void ApplyPenalties(absl::Span<const int32_t> previous_tokens);
  uint64_t NextU64();
  double NextUniform();  // [0, 1) with 53 random bits

  SamplingParams params_;
  uint64_t state_[4];                 // xoshiro256** state
  std::vector<float> logits_;         // scratch, reused across calls
  std::vector<int32_t> counts_;       // per-token occurrence counts, all zero between calls
  std::vector<Candidate> cands_;      // scratch, reused across calls
};

}  // namespace kvserve
