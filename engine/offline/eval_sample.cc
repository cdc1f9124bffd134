// The seeded random stream eval task builders draw from.
#include "engine/offline/eval_sample.h"

#include "engine/model/split_mix64.h"

namespace kvserve {

SampleRng::SampleRng(uint64_t seed, std::string_view task, int64_t context_tokens, int64_t sample) {
  // FNV-1a over the task name; it and the numbers are XORed into the state, a step between each.
  uint64_t h = 1469598103934665603ull;
  for (char c : task) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  // The seed enters hashed. Between folds SplitMix64's state only gains a constant, so a raw
  // seed XORed in where the sample index is made seed s's sample i seed 0's sample i ^ s: a
  // "second draw" was the first one's prompts in another order. Taking SplitMix64(0) back
  // out keeps seed 0's prompts, the ones every committed quality result ran on.
  state_ = SplitMix64(seed) ^ SplitMix64(0);
  for (uint64_t part : {h, static_cast<uint64_t>(context_tokens), static_cast<uint64_t>(sample)}) {
    state_ ^= part;
    Next();
  }
}

uint64_t SampleRng::Next() { return SplitMix64Next(state_); }

int64_t SampleRng::Uniform(int64_t lo, int64_t hi) {
  return lo + static_cast<int64_t>(Next() % static_cast<uint64_t>(hi - lo + 1));
}

double SampleRng::Unit() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

}  // namespace kvserve
