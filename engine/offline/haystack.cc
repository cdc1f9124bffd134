// RULER-style haystacks: noise sentences with needles at chosen depths, to an exact token count.
#include "engine/offline/haystack.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace kvserve {

const std::vector<std::string>& NoiseSentences() {
  static const std::vector<std::string> s = {" The grass is green.", " The sky is blue.", " The sun is yellow.",
                                             " Here we go.", " There and back again."};
  return s;
}

absl::StatusOr<std::vector<int32_t>> BuildHaystack(const Tokenizer& tokenizer, int64_t n_tokens,
                                                   const std::vector<Needle>& needles) {
  std::vector<std::vector<int32_t>> needle_tokens;
  int64_t needle_total = 0;
  for (const Needle& n : needles) {
    needle_tokens.push_back(tokenizer.Encode(n.text, false, false));
    needle_total += static_cast<int64_t>(needle_tokens.back().size());
  }
  const int64_t noise_len = n_tokens - needle_total;
  if (noise_len < 1) {
    return absl::InvalidArgumentError(absl::StrCat("a haystack of ", n_tokens, " tokens cannot hold needles of ",
                                                   needle_total, " tokens"));
  }
  std::vector<std::vector<int32_t>> sentences;
  for (const std::string& s : NoiseSentences()) sentences.push_back(tokenizer.Encode(s, false, false));

  // Noise first, remembering where each whole sentence ends.
  std::vector<int32_t> noise;
  std::vector<int64_t> boundaries = {0};
  for (size_t i = 0; static_cast<int64_t>(noise.size()) < noise_len; ++i) {
    const std::vector<int32_t>& s = sentences[i % sentences.size()];
    const int64_t left = noise_len - static_cast<int64_t>(noise.size());
    const int64_t take = std::min<int64_t>(static_cast<int64_t>(s.size()), left);
    noise.insert(noise.end(), s.begin(), s.begin() + take);
    if (take == static_cast<int64_t>(s.size())) boundaries.push_back(static_cast<int64_t>(noise.size()));
  }

  // Each needle at the boundary nearest its depth; needles at one boundary keep depth order.
  std::vector<std::pair<int64_t, size_t>> at;  // (boundary offset, needle index)
  for (size_t i = 0; i < needles.size(); ++i) {
    const double target = std::clamp(needles[i].depth, 0.0, 1.0) * static_cast<double>(noise_len);
    const auto nearest = std::min_element(boundaries.begin(), boundaries.end(), [&](int64_t a, int64_t b) {
      return std::fabs(static_cast<double>(a) - target) < std::fabs(static_cast<double>(b) - target);
    });
    at.emplace_back(*nearest, i);
  }
  std::stable_sort(at.begin(), at.end(), [&](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : needles[a.second].depth < needles[b.second].depth;
  });
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(n_tokens));
  int64_t copied = 0;
  for (const auto& [offset, i] : at) {
    out.insert(out.end(), noise.begin() + copied, noise.begin() + offset);
    out.insert(out.end(), needle_tokens[i].begin(), needle_tokens[i].end());
    copied = offset;
  }
  out.insert(out.end(), noise.begin() + copied, noise.end());
  return out;
}

}  // namespace kvserve
