// Passkey and multikey prompts: exactly the asked length, the needle and question inside,
// the same from the same seed, different across samples and seeds, in both prompt styles.
#include "engine/offline/retrieval_tasks.h"

#include "engine/offline/haystack.h"
#include "gtest/gtest.h"
#include "tests/engine/tokenizer/tokenizer_test_util.h"

namespace kvserve {
namespace {

using testing::SmolLm2Tokenizer;
using testing::SmolLm2TokenizerSpec;

TEST(RetrievalTasksTest, PasskeyHasTheExactLengthTheNeedleAndTheQuestionLast) {
  const Tokenizer& tok = *SmolLm2Tokenizer();
  for (PromptStyle style : {PromptStyle::kPlain, PromptStyle::kChat}) {
    for (int64_t n : {300, 1000, 2048}) {
      for (int64_t i = 0; i < 3; ++i) {
        auto s = BuildPasskeySample(tok, SmolLm2TokenizerSpec(), {n, i, 3, 0, style});
        ASSERT_TRUE(s.ok()) << s.status();
        EXPECT_EQ(static_cast<int64_t>(s->context.size()), n);
        ASSERT_EQ(s->answer.size(), 5u);
        const std::string text = tok.Decode(s->context);
        EXPECT_NE(text.find("The pass key is " + s->answer + ". Remember it. " + s->answer + " is the pass key."),
                  std::string::npos);
        const std::string ending = "What is the pass key?";
        EXPECT_NE(text.find(ending), std::string::npos);
        EXPECT_TRUE(text.ends_with("What is the pass key? The pass key is") ||
                    text.ends_with("<|im_start|>assistant\nThe pass key is"))
            << text.substr(text.size() - 60);
        EXPECT_EQ(text.find("<|im_start|>") != std::string::npos, style == PromptStyle::kChat);
      }
    }
  }
}

TEST(RetrievalTasksTest, PasskeyDepthMovesAcrossSamples) {
  const Tokenizer& tok = *SmolLm2Tokenizer();
  std::vector<size_t> where;
  for (int64_t i = 0; i < 3; ++i) {
    auto s = BuildPasskeySample(tok, SmolLm2TokenizerSpec(), {2000, i, 3, 0, PromptStyle::kPlain});
    ASSERT_TRUE(s.ok());
    const std::string text = tok.Decode(s->context);
    where.push_back(text.find("The pass key is " + s->answer));
    const double depth = static_cast<double>(where.back()) / static_cast<double>(text.size());
    EXPECT_NEAR(depth, 0.1 + 0.4 * static_cast<double>(i), 0.05) << i;
  }
}

TEST(RetrievalTasksTest, SameSeedSameSampleOtherSeedOtherKey) {
  const Tokenizer& tok = *SmolLm2Tokenizer();
  auto a = BuildPasskeySample(tok, SmolLm2TokenizerSpec(), {512, 1, 3, 7, PromptStyle::kPlain});
  auto b = BuildPasskeySample(tok, SmolLm2TokenizerSpec(), {512, 1, 3, 7, PromptStyle::kPlain});
  auto c = BuildPasskeySample(tok, SmolLm2TokenizerSpec(), {512, 1, 3, 8, PromptStyle::kPlain});
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->context, b->context);
  EXPECT_EQ(a->answer, b->answer);
  EXPECT_NE(a->answer, c->answer);
  auto m1 = BuildMultikeySample(tok, SmolLm2TokenizerSpec(), {512, 0, 3, 7, PromptStyle::kPlain});
  auto m2 = BuildMultikeySample(tok, SmolLm2TokenizerSpec(), {512, 0, 3, 7, PromptStyle::kPlain});
  auto m3 = BuildMultikeySample(tok, SmolLm2TokenizerSpec(), {512, 1, 3, 7, PromptStyle::kPlain});
  ASSERT_TRUE(m1.ok() && m2.ok() && m3.ok());
  EXPECT_EQ(m1->context, m2->context);
  EXPECT_NE(m1->context, m3->context);
}

TEST(RetrievalTasksTest, MultikeyHoldsFourDistinctNeedlesAndAsksForOneOfThem) {
  const Tokenizer& tok = *SmolLm2Tokenizer();
  for (PromptStyle style : {PromptStyle::kPlain, PromptStyle::kChat}) {
    for (int64_t i = 0; i < 4; ++i) {
      auto s = BuildMultikeySample(tok, SmolLm2TokenizerSpec(), {1500, i, 4, 0, style});
      ASSERT_TRUE(s.ok()) << s.status();
      EXPECT_EQ(s->context.size(), 1500u);
      ASSERT_EQ(s->answer.size(), 7u);
      const std::string text = tok.Decode(s->context);
      size_t needles = 0;
      for (size_t at = text.find("One of the special magic numbers for "); at != std::string::npos;
           at = text.find("One of the special magic numbers for ", at + 1)) {
        ++needles;
      }
      EXPECT_EQ(needles, 5u);  // four needles, and the answer's opening repeats one
      // The asked word's needle carries the answer.
      const size_t q = text.rfind("What is the special magic number for ") + 37;
      const std::string word = text.substr(q, text.find(' ', q) - q);
      EXPECT_NE(text.find("special magic numbers for " + word + " is: " + s->answer + "."), std::string::npos)
          << word;
      // The answer opens with the needle's own words, and the answer tokens are its digits.
      EXPECT_TRUE(text.ends_with("One of the special magic numbers for " + word + " is:"))
          << text.substr(text.size() - 60);
      EXPECT_EQ(tok.Decode(s->answer_tokens), " " + s->answer);
    }
  }
}

TEST(RetrievalTasksTest, TooShortAContextIsAnErrorNamingIt) {
  auto s = BuildMultikeySample(*SmolLm2Tokenizer(), SmolLm2TokenizerSpec(), {60, 0, 1, 0, PromptStyle::kPlain});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("multikey context of 60 tokens is too short"), std::string::npos)
      << s.status();
}

TEST(RetrievalTasksTest, ChatStyleNeedsAChatTemplate) {
  TokenizerSpec spec = SmolLm2TokenizerSpec();
  spec.chat_template.clear();
  auto s = BuildPasskeySample(*SmolLm2Tokenizer(), spec, {500, 0, 1, 0, PromptStyle::kChat});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("chat prompt style"), std::string::npos) << s.status();
}

TEST(HaystackTest, FillsExactlyAndCutsOnlyTheLastSentence) {
  const Tokenizer& tok = *SmolLm2Tokenizer();
  const int64_t first = static_cast<int64_t>(tok.Encode(NoiseSentences()[0], false, false).size());
  for (int64_t n : {int64_t{1}, first - 1, first, int64_t{100}, int64_t{333}}) {
    auto h = BuildHaystack(tok, n, {});
    ASSERT_TRUE(h.ok());
    EXPECT_EQ(static_cast<int64_t>(h->size()), n);
    EXPECT_EQ(tok.Decode(*h).starts_with(NoiseSentences()[0]), n >= first) << n;
  }
  auto none = BuildHaystack(tok, 3, {{" This needle is much longer than three tokens.", 0.5}});
  EXPECT_FALSE(none.ok());
}

}  // namespace
}  // namespace kvserve
