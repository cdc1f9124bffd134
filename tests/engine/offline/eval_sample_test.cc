// The eval's seeded sample stream: another seed is another draw, and seed 0 still draws the
// prompts the committed quality results (docs/quality/) ran on.
#include "engine/offline/eval_sample.h"

#include <cstdint>
#include <set>

#include "engine/offline/retrieval_tasks.h"
#include "gtest/gtest.h"
#include "tests/engine/tokenizer/tokenizer_test_util.h"

namespace kvserve {
namespace {

using testing::SmolLm2Tokenizer;
using testing::SmolLm2TokenizerSpec;

TEST(EvalSampleTest, NoSeedRedrawsAnotherSeedsSamples) {
  // Streams of seeds 0-3 over samples 0-999: every first draw distinct (seed s's sample i
  // was seed 0's sample i ^ s before the seed was hashed).
  std::set<uint64_t> first;
  for (uint64_t seed = 0; seed < 4; ++seed) {
    for (int64_t i = 0; i < 1000; ++i) first.insert(SampleRng(seed, "multikey", 8000, i).Next());
  }
  EXPECT_EQ(first.size(), 4000u);
}

TEST(EvalSampleTest, ASecondSeedsPromptsAreNoneOfTheFirstSeeds) {
  const Tokenizer& tok = *SmolLm2Tokenizer();
  std::set<std::vector<int32_t>> seed0;
  for (int64_t i = 0; i < 8; ++i) {
    auto s = BuildMultikeySample(tok, SmolLm2TokenizerSpec(), {512, i, 8, 0, PromptStyle::kPlain});
    ASSERT_TRUE(s.ok()) << s.status();
    seed0.insert(s->context);
  }
  for (int64_t i = 0; i < 8; ++i) {
    auto s = BuildMultikeySample(tok, SmolLm2TokenizerSpec(), {512, i, 8, 1, PromptStyle::kPlain});
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_FALSE(seed0.contains(s->context)) << "seed 1, sample " << i;
  }
}

TEST(EvalSampleTest, SeedZeroKeepsTheCommittedResultsPrompts) {
  // Multikey at 8,000 tokens, seed 0: samples 1 and 24 are the ones docs/QUALITY.md's
  // budget sweeps follow (docs/quality/diagnostics/8000_multikey_budgets_s1.json, _s24.json).
  const Tokenizer& tok = *SmolLm2Tokenizer();
  auto s1 = BuildMultikeySample(tok, SmolLm2TokenizerSpec(), {8000, 1, 50, 0, PromptStyle::kPlain});
  auto s24 = BuildMultikeySample(tok, SmolLm2TokenizerSpec(), {8000, 24, 50, 0, PromptStyle::kPlain});
  ASSERT_TRUE(s1.ok() && s24.ok());
  EXPECT_EQ(s1->answers.at(0), "3293214");
  EXPECT_EQ(s24->answers.at(0), "8395411");
}

}  // namespace
}  // namespace kvserve
