// Picks the next token from a row of logits: penalties, then greedy or
// temperature / top-k / top-p / min-p followed by a seeded, library-independent draw.
#pragma once
#include <cstdint>
#include <optional>
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

  // The same token as Sample on the full row, consuming the same PRNG draws, from that row's
  // best candidates only: ids and logits (equal sizes, n >= 1) as cpu::RowTopK orders them
  // (higher logit first, equal logits by lower id, NaN as -inf), vocab = the full row's size.
  // Returns nullopt, without touching the PRNG, when the candidates cannot decide the draw
  // exactly; the caller then samples the full row. That is the case when a penalty is on,
  // when temperature > 0 and top_k is 0 or more than n, when the best logit is +inf (Sample
  // folds it into FLT_MAX, which can change its ties), and when n == top_k < vocab with all
  // n finite: Sample orders its candidates differently when exactly top_k logits are finite,
  // and only a (top_k + 1)-th candidate tells. Fetch TopKCandidatesNeeded() candidates.
  std::optional<int32_t> SampleFromTopK(absl::Span<const int32_t> ids, absl::Span<const float> logits,
                                        int64_t vocab);

  // How many candidates per row SampleFromTopK needs for an exact draw on a vocab-sized row:
  // 1 when greedy, top_k + 1 when 1 <= top_k < vocab, and 0 when no candidate
  // list short of the whole row will do (a penalty on, or top-k off at temperature > 0).
  static int64_t TopKCandidatesNeeded(const SamplingParams& params, int64_t vocab);

 private:
  struct Candidate {
    int32_t id;
    float logit;  // after penalties
    double w;     // exp((logit - max) / T), an unnormalised probability
  };

  // The strict total order of candidates: higher logit first, then lower id.
  static bool Better(const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  }
  static bool PenaltiesOn(const SamplingParams& params);
  void ApplyPenalties(absl::Span<const int32_t> previous_tokens);
  // The shared tail of Sample and SampleFromTopK: temperature, top-p, min-p and the draw over
  // cands_ (no -inf logit, at least one entry), whose prefix [0, sorted) is in Better() order;
  // max_logit is the largest logit among them.
  int32_t DrawFromCandidates(size_t sorted, double max_logit);
  uint64_t NextU64();
  double NextUniform();  // [0, 1) with 53 random bits

  SamplingParams params_;
  uint64_t state_[4];                 // xoshiro256** state
  std::vector<float> logits_;         // scratch, reused across calls
  std::vector<int32_t> counts_;       // per-token occurrence counts, all zero between calls
  std::vector<Candidate> cands_;      // scratch, reused across calls
};

}  // namespace kvserve
