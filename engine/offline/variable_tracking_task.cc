#include "engine/offline/variable_tracking_task.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/offline/haystack.h"

namespace kvserve {
namespace {

constexpr int kChainLength = 3;
constexpr int kNameLetters = 5;

std::string RandomName(SampleRng& rng) {
  std::string name;
  for (int i = 0; i < kNameLetters; ++i) name += static_cast<char>('A' + rng.Uniform(0, 25));
  return name;
}

}  // namespace

absl::StatusOr<EvalSample> BuildVariableTrackingSample(const Tokenizer& tokenizer, const TokenizerSpec& spec,
                                                       const RetrievalSpec& r) {
  SampleRng rng(r.seed, "vartrack", r.context_tokens, r.sample);
  std::vector<std::string> names;
  while (static_cast<int>(names.size()) < kChainLength) {
    std::string name = RandomName(rng);
    // Distinct names, none inside another, so "contains every name" means every name.
    const bool clash = std::any_of(names.begin(), names.end(), [&](const std::string& n) {
      return n.find(name) != std::string::npos || name.find(n) != std::string::npos;
    });
    if (!clash) names.push_back(std::move(name));
  }
  const std::string value = RandomDigits(rng, 5);
  std::vector<double> depths;
  for (int i = 0; i < kChainLength; ++i) depths.push_back(RandomNeedleDepth(rng));
  std::sort(depths.begin(), depths.end());  // a link comes after the one it copies
  std::vector<Needle> needles;
  needles.push_back({absl::StrCat(" VAR ", names[0], " = ", value, "."), depths[0]});
  for (int i = 1; i < kChainLength; ++i) {
    needles.push_back({absl::StrCat(" VAR ", names[i], " = VAR ", names[i - 1], "."), depths[i]});
  }
  const RetrievalPrompt prompt{
      "Memorize and track the chain of variable assignments hidden in the following text.\n",
      absl::StrCat("\nQuestion: Find all variables that are assigned the value ", value, " in the text above."),
      absl::StrCat("Answer: According to the chain of variable assignments in the text above, ", kChainLength,
                   " variables are assigned the value ", value, ", they are: VAR")};
  absl::StatusOr<EvalSample> s = AssembleRetrievalSample(tokenizer, spec, r, prompt, needles, "vartrack");
  if (!s.ok()) return s;
  s->answers = names;
  s->answer_tokens = tokenizer.Encode(absl::StrCat(" ", absl::StrJoin(names, ", VAR "), "."), false, false);
  s->source = absl::StrFormat("chain %s at depths %.2f..%.2f", absl::StrJoin(names, " <- "), depths.front(),
                              depths.back());
  return s;
}

}  // namespace kvserve
