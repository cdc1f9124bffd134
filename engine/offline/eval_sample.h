// One evaluation context: its tokens, what follows them or what a right answer contains,
// and the deterministic random stream every task builder draws from.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvserve {

struct EvalSample {
  std::vector<int32_t> context;       // exactly the requested number of tokens
  std::vector<int32_t> continuation;  // kl: the text's next tokens, teacher-forced after the context
  std::vector<std::string> answers;   // retrieval: what a correct answer contains, every one
                                      // (a passkey's digits; a multi-value needle's values)
  std::vector<int32_t> answer_tokens; // retrieval: the answer as the model would say it next
                                      // (" NNNNN"), teacher-forced for its log-likelihood;
                                      // the greedy answer gets at least this many tokens + 4
  std::vector<std::string> cues;      // retrieval: what ties the asked needle to the question
                                      // (multikey: "for WORD is:"), first occurrence; whether its
                                      // tokens survive is reported beside the answer's
  std::vector<std::string> decoys;    // retrieval: the other needles' answers (multikey: the
                                      // other keys' numbers), each at its first occurrence;
                                      // how widely they survive is reported beside the asked one's
  std::string source;                 // where it came from, for progress lines
};

// SplitMix64 keyed by (seed, task, context length, sample index): the same sample comes out
// on every machine and standard library, and another seed draws other samples (none of its
// indices gives one of another seed's).
class SampleRng {
 public:
  SampleRng(uint64_t seed, std::string_view task, int64_t context_tokens, int64_t sample);
  uint64_t Next();
  // Uniform in [lo, hi] (inclusive; the modulo bias is far below anything measured here).
  int64_t Uniform(int64_t lo, int64_t hi);
  // Uniform in [0, 1).
  double Unit();

 private:
  uint64_t state_;
};

}  // namespace kvserve
