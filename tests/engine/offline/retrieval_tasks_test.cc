// Passkey, multikey, multivalue and variable-tracking prompts: exactly the asked length, the
// needles and question inside, the same from the same seed, different across samples and
// seeds, in both prompt styles.
#include "engine/offline/retrieval_tasks.h"

#include "engine/offline/haystack.h"
#include "engine/offline/variable_tracking_task.h"
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
        ASSERT_EQ(s->answers.at(0).size(), 5u);
        const std::string text = tok.Decode(s->context);
        const std::string& key = s->answers.at(0);
        EXPECT_NE(text.find("The pass key is " + key + ". Remember it. " + key + " is the pass key."),
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
    where.push_back(text.find("The pass key is " + s->answers.at(0)));
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
  EXPECT_EQ(a->answers, b->answers);
  EXPECT_NE(a->answers, c->answers);
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
      ASSERT_EQ(s->answers.at(0).size(), 7u);
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
      EXPECT_NE(text.find("special magic numbers for " + word + " is: " + s->answers.at(0) + "."), std::string::npos)
          << word;
      // The cue's first occurrence is that needle's key, not the question or another needle.
      ASSERT_EQ(s->cues, std::vector<std::string>{"for " + word + " is:"});
      EXPECT_EQ(text.substr(text.find(s->cues[0]), s->cues[0].size() + 1 + 7), s->cues[0] + " " + s->answers.at(0));
      // The decoys are the three other needles' numbers, each on its own needle's line.
      ASSERT_EQ(s->decoys.size(), 3u);
      for (const std::string& decoy : s->decoys) {
        EXPECT_NE(decoy, s->answers.at(0));
        const size_t at = text.find(" is: " + decoy + ".");
        ASSERT_NE(at, std::string::npos) << decoy;
        const std::string lead = "special magic numbers for ";
        const size_t line = text.rfind(lead, at);
        ASSERT_NE(line, std::string::npos) << decoy;
        const std::string key = text.substr(line + lead.size(), at - line - lead.size());
        EXPECT_NE(key, word) << decoy;                     // another key's number
        EXPECT_EQ(key.find(' '), std::string::npos) << key;  // right after its key
      }
      // The answer opens with the needle's own words, and the answer tokens are its digits.
      EXPECT_TRUE(text.ends_with("One of the special magic numbers for " + word + " is:"))
          << text.substr(text.size() - 60);
      EXPECT_EQ(tok.Decode(s->answer_tokens), " " + s->answers.at(0));
    }
  }
}

TEST(RetrievalTasksTest, MultivalueHoldsTwoValuesOfOneKeyInTextOrder) {
  const Tokenizer& tok = *SmolLm2Tokenizer();
  for (PromptStyle style : {PromptStyle::kPlain, PromptStyle::kChat}) {
    for (int64_t i = 0; i < 4; ++i) {
      auto s = BuildMultivalueSample(tok, SmolLm2TokenizerSpec(), {1200, i, 4, 0, style});
      ASSERT_TRUE(s.ok()) << s.status();
      EXPECT_EQ(s->context.size(), 1200u);
      ASSERT_EQ(s->answers.size(), 2u);
      EXPECT_NE(s->answers[0], s->answers[1]);
      const std::string text = tok.Decode(s->context);
      const size_t q = text.rfind("What are all the special magic numbers for ") + 43;
      const std::string word = text.substr(q, text.find(' ', q) - q);
      const size_t first = text.find("special magic numbers for " + word + " is: " + s->answers[0] + ".");
      const size_t second = text.find("special magic numbers for " + word + " is: " + s->answers[1] + ".");
      ASSERT_NE(first, std::string::npos) << word;
      ASSERT_NE(second, std::string::npos) << word;
      EXPECT_LT(first, second);  // the answer lists them as the text gives them
      EXPECT_TRUE(text.ends_with("The special magic numbers for " + word + " are:")) << text.substr(text.size() - 60);
      EXPECT_EQ(tok.Decode(s->answer_tokens), " " + s->answers[0] + ", " + s->answers[1] + ".");
    }
  }
}

TEST(RetrievalTasksTest, VariableTrackingHidesOneChainInOrderAndAsksForItsValue) {
  const Tokenizer& tok = *SmolLm2Tokenizer();
  for (PromptStyle style : {PromptStyle::kPlain, PromptStyle::kChat}) {
    for (int64_t i = 0; i < 4; ++i) {
      auto s = BuildVariableTrackingSample(tok, SmolLm2TokenizerSpec(), {1200, i, 4, 3, style});
      ASSERT_TRUE(s.ok()) << s.status();
      EXPECT_EQ(s->context.size(), 1200u);
      ASSERT_EQ(s->answers.size(), 3u);
      const std::string text = tok.Decode(s->context);
      // The first link holds the value the question asks about; each later link copies the one before.
      const size_t head = text.find("VAR " + s->answers[0] + " = ");
      ASSERT_NE(head, std::string::npos);
      const std::string value = text.substr(head + 4 + 5 + 3, 5);
      EXPECT_NE(text.find("assigned the value " + value + " in the text above"), std::string::npos) << value;
      size_t last = head;
      for (size_t k = 1; k < 3; ++k) {
        const size_t link = text.find("VAR " + s->answers[k] + " = VAR " + s->answers[k - 1] + ".");
        ASSERT_NE(link, std::string::npos) << k;
        EXPECT_GT(link, last);
        last = link;
      }
      EXPECT_TRUE(text.ends_with("they are: VAR")) << text.substr(text.size() - 60);
      EXPECT_EQ(tok.Decode(s->answer_tokens),
                " " + s->answers[0] + ", VAR " + s->answers[1] + ", VAR " + s->answers[2] + ".");
    }
  }
  auto a = BuildVariableTrackingSample(tok, SmolLm2TokenizerSpec(), {800, 0, 2, 5, PromptStyle::kPlain});
  auto b = BuildVariableTrackingSample(tok, SmolLm2TokenizerSpec(), {800, 0, 2, 6, PromptStyle::kPlain});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->answers, b->answers);
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
