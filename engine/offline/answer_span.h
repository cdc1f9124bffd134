// Where a retrieval sample's answers sit in its context, as token positions: what
// KeptPositions is asked about, to tell a needle the compression dropped from one it kept
// but the model misread.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "engine/tokenizer/tokenizer.h"

namespace kvserve {

// For each answer, the tokens [begin, end) of the context whose text overlaps its first
// occurrence. Empty when an answer does not occur, or when the tokens decoded one by one do
// not add up to the decoded context (then no token offsets can be trusted).
std::vector<std::pair<int64_t, int64_t>> AnswerSpans(const Tokenizer& tokenizer, absl::Span<const int32_t> context,
                                                     const std::vector<std::string>& answers);

}  // namespace kvserve
