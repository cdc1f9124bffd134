#include "engine/offline/answer_span.h"

#include <algorithm>

namespace kvserve {

std::vector<std::pair<int64_t, int64_t>> AnswerSpans(const Tokenizer& tokenizer, absl::Span<const int32_t> context,
                                                     const std::vector<std::string>& answers) {
  // Each token's end offset in the text its one-by-one decodings make.
  std::string text;
  std::vector<size_t> ends;
  ends.reserve(context.size());
  for (int32_t id : context) {
    text += tokenizer.Decode(absl::MakeConstSpan(&id, 1), /*render_special=*/true);
    ends.push_back(text.size());
  }
  if (text != tokenizer.Decode(context, /*render_special=*/true)) return {};
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (const std::string& answer : answers) {
    const size_t at = answer.empty() ? std::string::npos : text.find(answer);
    if (at == std::string::npos) return {};
    // The first token ending past the answer's start, to the first ending at or past its end.
    const auto first = std::upper_bound(ends.begin(), ends.end(), at);
    const auto last = std::lower_bound(first, ends.end(), at + answer.size());
    spans.emplace_back(first - ends.begin(), (last - ends.begin()) + 1);
  }
  return spans;
}

}  // namespace kvserve
