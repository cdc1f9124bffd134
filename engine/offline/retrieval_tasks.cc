#include "engine/offline/retrieval_tasks.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/offline/haystack.h"

namespace kvserve {
namespace {

constexpr int kMultikeyNeedles = 4;
constexpr int kMultivalueNeedles = 2;

// Plain nouns, each a single word, so no key is a prefix of another.
const char* const kKeyWords[] = {"apple",   "river",  "candle", "harbor", "violin", "meadow", "lantern", "falcon",
                                 "granite", "orchid", "pepper", "saddle", "tunnel", "walnut", "zephyr", "bishop",
                                 "cactus",  "dolphin", "ember", "fossil", "glacier", "hammock", "igloo", "jasmine"};

constexpr char kMagicNumbersInstruction[] =
    "Some special magic numbers are hidden within the following text. Make sure to memorize it. "
    "I will quiz you about the numbers afterwards.\n";

// The multikey and multivalue needle: " One of the special magic numbers for WORD is: N."
Needle MagicNumberNeedle(const std::string& word, const std::string& value, double depth) {
  return {absl::StrCat(" One of the special magic numbers for ", word, " is: ", value, "."), depth};
}

}  // namespace

double RandomNeedleDepth(SampleRng& rng) { return 0.05 + 0.9 * rng.Unit(); }

std::string RandomDigits(SampleRng& rng, int n) {
  // A leading non-zero digit keeps the number's written length at n.
  std::string s = std::to_string(rng.Uniform(1, 9));
  for (int i = 1; i < n; ++i) s += std::to_string(rng.Uniform(0, 9));
  return s;
}

absl::StatusOr<EvalSample> AssembleRetrievalSample(const Tokenizer& tokenizer, const TokenizerSpec& spec,
                                                   const RetrievalSpec& r, const RetrievalPrompt& prompt,
                                                   const std::vector<Needle>& needles, std::string_view task) {
  absl::StatusOr<PromptFrame> frame = FramePrompt(tokenizer, spec, prompt, r.style);
  if (!frame.ok()) return frame.status();
  const int64_t room = r.context_tokens - static_cast<int64_t>(frame->head.size() + frame->tail.size());
  absl::StatusOr<std::vector<int32_t>> hay = BuildHaystack(tokenizer, room, needles);
  if (!hay.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("a ", std::string(task), " context of ", r.context_tokens,
                                                   " tokens is too short for its question and needles (",
                                                   hay.status().message(), ")"));
  }
  EvalSample s;
  s.context = std::move(frame->head);
  s.context.insert(s.context.end(), hay->begin(), hay->end());
  s.context.insert(s.context.end(), frame->tail.begin(), frame->tail.end());
  return s;
}

absl::StatusOr<EvalSample> BuildPasskeySample(const Tokenizer& tokenizer, const TokenizerSpec& spec,
                                              const RetrievalSpec& r) {
  SampleRng rng(r.seed, "passkey", r.context_tokens, r.sample);
  const std::string key = RandomDigits(rng, 5);
  const double depth =
      r.n_samples > 1 ? 0.1 + 0.8 * static_cast<double>(r.sample) / static_cast<double>(r.n_samples - 1) : 0.5;
  const RetrievalPrompt prompt{
      "There is an important info hidden inside a lot of irrelevant text. Find it and memorize it. "
      "I will quiz you about the important information there.\n",
      "\nWhat is the pass key?", "The pass key is"};
  const Needle needle{absl::StrCat(" The pass key is ", key, ". Remember it. ", key, " is the pass key."), depth};
  absl::StatusOr<EvalSample> s = AssembleRetrievalSample(tokenizer, spec, r, prompt, {needle}, "passkey");
  if (!s.ok()) return s;
  s->answers = {key};
  s->answer_tokens = tokenizer.Encode(absl::StrCat(" ", key), false, false);
  s->source = absl::StrFormat("depth %.2f", depth);
  return s;
}

absl::StatusOr<EvalSample> BuildMultikeySample(const Tokenizer& tokenizer, const TokenizerSpec& spec,
                                               const RetrievalSpec& r) {
  SampleRng rng(r.seed, "multikey", r.context_tokens, r.sample);
  std::vector<std::string> words(std::begin(kKeyWords), std::end(kKeyWords));
  // Partial Fisher-Yates: the first kMultikeyNeedles words are a uniform draw.
  const int64_t n_words = static_cast<int64_t>(words.size());
  for (int i = 0; i < kMultikeyNeedles; ++i) std::swap(words[i], words[rng.Uniform(i, n_words - 1)]);
  std::vector<Needle> needles;
  std::vector<std::string> values;
  for (int i = 0; i < kMultikeyNeedles; ++i) {
    values.push_back(RandomDigits(rng, 7));
    needles.push_back(MagicNumberNeedle(words[i], values[i], RandomNeedleDepth(rng)));
  }
  const int64_t asked = rng.Uniform(0, kMultikeyNeedles - 1);
  const std::string& word = words[asked];
  const RetrievalPrompt prompt{
      kMagicNumbersInstruction,
      absl::StrCat("\nWhat is the special magic number for ", word, " mentioned in the provided text?"),
      // The needle's own words: SmolLM2-135M finishes them from the cache (a paraphrase it
      // answers far less often with the full cache, which tells methods apart less well).
      absl::StrCat("One of the special magic numbers for ", word, " is:")};
  absl::StatusOr<EvalSample> s = AssembleRetrievalSample(tokenizer, spec, r, prompt, needles, "multikey");
  if (!s.ok()) return s;
  s->answers = {values[asked]};
  s->cues = {absl::StrCat("for ", word, " is:")};  // the needle's line; the question comes after it
  for (int i = 0; i < kMultikeyNeedles; ++i) {
    if (i != asked) s->decoys.push_back(values[i]);
  }
  s->answer_tokens = tokenizer.Encode(absl::StrCat(" ", values[asked]), false, false);
  s->source = absl::StrFormat("key %s at depth %.2f", word, needles[asked].depth);
  return s;
}

absl::StatusOr<EvalSample> BuildMultivalueSample(const Tokenizer& tokenizer, const TokenizerSpec& spec,
                                                 const RetrievalSpec& r) {
  SampleRng rng(r.seed, "multivalue", r.context_tokens, r.sample);
  const int64_t n_words = static_cast<int64_t>(std::size(kKeyWords));
  const std::string word = kKeyWords[rng.Uniform(0, n_words - 1)];
  // Drawn depths, then sorted: the answer lists the values in the order the text gives them.
  std::vector<double> depths;
  for (int i = 0; i < kMultivalueNeedles; ++i) depths.push_back(RandomNeedleDepth(rng));
  std::sort(depths.begin(), depths.end());
  std::vector<Needle> needles;
  std::vector<std::string> values;
  for (int i = 0; i < kMultivalueNeedles; ++i) {
    values.push_back(RandomDigits(rng, 7));
    needles.push_back(MagicNumberNeedle(word, values[i], depths[i]));
  }
  const RetrievalPrompt prompt{
      kMagicNumbersInstruction,
      absl::StrCat("\nWhat are all the special magic numbers for ", word, " mentioned in the provided text?"),
      absl::StrCat("The special magic numbers for ", word, " are:")};
  absl::StatusOr<EvalSample> s = AssembleRetrievalSample(tokenizer, spec, r, prompt, needles, "multivalue");
  if (!s.ok()) return s;
  s->answers = values;
  s->answer_tokens = tokenizer.Encode(absl::StrCat(" ", absl::StrJoin(values, ", "), "."), false, false);
  s->source = absl::StrFormat("key %s, values at depths %.2f and %.2f", word, depths[0], depths[1]);
  return s;
}

}  // namespace kvserve
