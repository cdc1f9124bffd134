// Token sampler: see sampler.h. Kept free of std:: distributions and of any
// implementation-defined ordering so a seed gives the same tokens on every standard library.
#include "engine/model/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/model/split_mix64.h"

namespace kvserve {
namespace {

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

Sampler::Sampler(const SamplingParams& params) : params_(params) {
  // splitmix64 expands the seed, as the xoshiro authors recommend; it never yields an
  // all-zero state, which would make xoshiro emit zeros forever.
  uint64_t x = params.seed;
  for (uint64_t& s : state_) s = SplitMix64Next(x);
}

uint64_t Sampler::NextU64() {
  const uint64_t result = Rotl(state_[1] * 5, 7) * 9;
  const uint64_t t = state_[1] << 17;
  state_[2] ^= state_[0];
  state_[3] ^= state_[1];
  state_[1] ^= state_[2];
  state_[0] ^= state_[3];
  state_[2] ^= t;
  state_[3] = Rotl(state_[3], 45);
  return result;
}

double Sampler::NextUniform() { return static_cast<double>(NextU64() >> 11) * 0x1.0p-53; }

bool Sampler::PenaltiesOn(const SamplingParams& p) {
  return p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
}

void Sampler::ApplyPenalties(absl::Span<const int32_t> previous_tokens) {
  const bool rep = params_.repetition_penalty != 1.0f;
  if (!PenaltiesOn(params_) || previous_tokens.empty()) return;
  const int32_t n = static_cast<int32_t>(logits_.size());
  // A dense count array (zeroed again below, touching only seen ids) costs O(prompt) per
  // step, where sorting a long prompt's ids every step would cost O(prompt log prompt).
  if (counts_.size() != logits_.size()) counts_.assign(logits_.size(), 0);
  for (int32_t t : previous_tokens)
    if (t >= 0 && t < n) ++counts_[t];
  for (int32_t t : previous_tokens) {
    if (t < 0 || t >= n || counts_[t] == 0) continue;  // 0: already applied
    float& l = logits_[t];
    if (rep) l = l > 0 ? l / params_.repetition_penalty : l * params_.repetition_penalty;
    l -= static_cast<float>(counts_[t]) * params_.frequency_penalty + params_.presence_penalty;
    counts_[t] = 0;
  }
}

int32_t Sampler::Sample(absl::Span<const float> logits,
                        absl::Span<const int32_t> previous_tokens) {
  if (logits.empty()) return -1;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  logits_.assign(logits.begin(), logits.end());
  for (float& l : logits_) {
    if (std::isnan(l)) l = kNegInf;
    // +inf would turn the softmax into inf/inf; the largest float keeps it the winner.
    if (l == std::numeric_limits<float>::infinity()) l = std::numeric_limits<float>::max();
  }
  ApplyPenalties(previous_tokens);

  // Greedy: strict '>' keeps the lowest id among equal maxima.
  int32_t best = 0;
  for (int32_t i = 1; i < static_cast<int32_t>(logits_.size()); ++i)
    if (logits_[i] > logits_[best]) best = i;
  if (params_.temperature == 0.0f || logits_[best] == kNegInf) return best;

  cands_.clear();
  for (int32_t i = 0; i < static_cast<int32_t>(logits_.size()); ++i)
    if (logits_[i] != kNegInf) cands_.push_back({i, logits_[i], 0.0});

  // top-k: O(V + k log k) instead of sorting the whole vocab; leaves the kept prefix sorted.
  // Better() is a strict total order, so nth_element + sort select the same set in the same
  // order on every library, ties included.
  size_t sorted = 0;  // cands_[0, sorted) is in Better() order
  const size_t k = static_cast<size_t>(params_.top_k);
  if (k > 0 && k < cands_.size()) {
    std::nth_element(cands_.begin(), cands_.begin() + k - 1, cands_.end(), Better);
    std::sort(cands_.begin(), cands_.begin() + k, Better);
    cands_.resize(k);
    sorted = k;
  }
  return DrawFromCandidates(sorted, logits_[best]);  // top-k always keeps the best token
}

std::optional<int32_t> Sampler::SampleFromTopK(absl::Span<const int32_t> ids, absl::Span<const float> logits,
                                               int64_t vocab) {
  const size_t n = ids.size();
  if (n == 0 || logits.size() != n || PenaltiesOn(params_)) return std::nullopt;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const auto logit = [&](size_t j) { return std::isnan(logits[j]) ? kNegInf : logits[j]; };
  if (logit(0) == std::numeric_limits<float>::infinity()) return std::nullopt;
  // Sample's greedy rule: the best logit, lowest id on ties, is exactly the first candidate.
  if (params_.temperature == 0.0f || logit(0) == kNegInf) return ids[0];
  const size_t k = static_cast<size_t>(params_.top_k);
  if (params_.top_k < 1 || k > n) return std::nullopt;

  cands_.clear();
  for (size_t j = 0; j < k && logit(j) != kNegInf; ++j) cands_.push_back({ids[j], logit(j), 0.0});
  // Sample applies top-k only when the row has more than top_k finite logits; then its
  // candidates are these k in Better() order, else all finite ones in id order.
  bool more_than_k;
  if (cands_.size() < k) {
    more_than_k = false;
  } else if (n > k) {
    more_than_k = logit(k) != kNegInf;
  } else if (vocab <= static_cast<int64_t>(k)) {
    more_than_k = false;
  } else {
    return std::nullopt;
  }
  if (more_than_k) return DrawFromCandidates(k, logit(0));
  std::sort(cands_.begin(), cands_.end(), [](const Candidate& a, const Candidate& b) { return a.id < b.id; });
  return DrawFromCandidates(0, logit(0));
}

int64_t Sampler::TopKCandidatesNeeded(const SamplingParams& params, int64_t vocab) {
  if (PenaltiesOn(params) || vocab <= 0) return 0;
  if (params.temperature == 0.0f) return 1;
  if (params.top_k < 1 || params.top_k >= vocab) return 0;
  return params.top_k + 1;
}

int32_t Sampler::DrawFromCandidates(size_t sorted, double max_logit) {
  // Temperature. Double precision so max/T cannot overflow even for a tiny T.
  const double inv_t = 1.0 / static_cast<double>(params_.temperature);
  double total = 0.0;  // summed in a fixed order (id or Better() order)
  for (Candidate& c : cands_) {
    c.w = std::exp((static_cast<double>(c.logit) - max_logit) * inv_t);
    total += c.w;
  }

  // top-p: the smallest Better()-ordered prefix whose mass reaches top_p. Without top-k the
  // prefix is sorted in growing chunks, since nucleus sets are usually far smaller than V.
  if (params_.top_p < 1.0f) {
    const double target = static_cast<double>(params_.top_p) * total;
    double cum = 0.0;
    size_t keep = 0;
    size_t chunk = 128;
    while (keep < cands_.size()) {
      if (keep == sorted) {
        // nth_element + sort is O(V + chunk log chunk); partial_sort's heap would be
        // O(V log chunk) and much slower once the nucleus spans thousands of tokens.
        const size_t end = std::min(cands_.size(), sorted + chunk);
        std::nth_element(cands_.begin() + sorted, cands_.begin() + end - 1, cands_.end(), Better);
        std::sort(cands_.begin() + sorted, cands_.begin() + end, Better);
        sorted = end;
        chunk *= 8;
      }
      cum += cands_[keep++].w;
      if (cum >= target) break;
    }
    cands_.resize(std::max<size_t>(keep, 1));
    total = cum;
  }

  // min-p: p_i < min_p * p_max  <=>  w_i < min_p, because w_max == 1.
  if (params_.min_p > 0.0f) {
    const double min_p = params_.min_p;
    double kept = 0.0;
    size_t out = 0;
    for (const Candidate& c : cands_) {
      if (c.w < min_p) continue;
      cands_[out++] = c;
      kept += c.w;
    }
    cands_.resize(out);  // never empty: the max token has w == 1 >= min_p
    total = kept;
  }

  // Inverse-CDF draw over the kept set. cum is summed in the same order as total, so only
  // u rounding up to total falls through; that goes to the last token with non-zero mass.
  const double u = NextUniform() * total;
  double cum = 0.0;
  int32_t last_positive = cands_.front().id;
  for (const Candidate& c : cands_) {
    cum += c.w;
    if (c.w > 0.0) last_positive = c.id;
    if (u < cum) return c.id;
  }
  return last_positive;
}

}  // namespace kvserve
