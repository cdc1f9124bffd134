// The long natural texts the kl task reads (tests/data/corpus/*.txt), tokenized once, and
// the context + continuation windows cut from them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/offline/eval_sample.h"
#include "engine/tokenizer/tokenizer.h"

namespace kvserve {

// tests/data/corpus under the current directory when it exists, else the same folder of
// the source tree this binary was built from.
std::string DefaultCorpusDir();

class TextCorpus {
 public:
  // Every *.txt in dir, in name order. NOT_FOUND naming dir when it holds none.
  static absl::StatusOr<TextCorpus> Load(const std::string& dir, const Tokenizer& tokenizer);

  // context_tokens tokens (BOS first when the model wants one) followed by `continuation`
  // tokens of the same text. Sample i reads the i-th text long enough (cycling), at an
  // offset drawn from the seed. INVALID_ARGUMENT when no text is long enough.
  absl::StatusOr<EvalSample> Sample(int64_t context_tokens, int64_t continuation, int64_t sample,
                                    uint64_t seed) const;

  size_t size() const { return names_.size(); }

 private:
  std::vector<std::string> names_;
  std::vector<std::vector<int32_t>> tokens_;  // per text, without BOS
  int32_t bos_ = -1;                          // prepended when >= 0
};

}  // namespace kvserve
