// The committed corpus: every text is long enough for the longest context, samples
// are exact-length windows of one text with the continuation right after, and errors name
// what is missing.
#include "engine/offline/text_corpus.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "gtest/gtest.h"
#include "tests/engine/tokenizer/tokenizer_test_util.h"

namespace kvserve {
namespace {

std::string CorpusDir() { return testing::SourcePath("tests/data/corpus"); }

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(TextCorpusTest, HoldsSixTextsLongEnoughForA7500TokenContextOnSmolLm2) {
  auto corpus = TextCorpus::Load(CorpusDir(), *testing::SmolLm2Tokenizer());
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  EXPECT_EQ(corpus->size(), 6u);
  // Three samples at the longest context come from three different texts.
  std::set<std::string> texts;
  for (int64_t i = 0; i < 3; ++i) {
    auto s = corpus->Sample(7500, 64, i, 0);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->context.size(), 7500u);
    EXPECT_EQ(s->continuation.size(), 64u);
    texts.insert(s->source.substr(0, s->source.find(' ')));
  }
  EXPECT_EQ(texts.size(), 3u);
}

TEST(TextCorpusTest, ContinuationFollowsTheContextInTheText) {
  const Tokenizer& tok = *testing::SmolLm2Tokenizer();
  auto corpus = TextCorpus::Load(CorpusDir(), tok);
  ASSERT_TRUE(corpus.ok());
  for (int64_t i = 0; i < 2; ++i) {
    auto s = corpus->Sample(500, 32, i, 3);
    ASSERT_TRUE(s.ok());
    std::vector<int32_t> all(s->context.begin() + (tok.add_bos() ? 1 : 0), s->context.end());
    all.insert(all.end(), s->continuation.begin(), s->continuation.end());
    const std::string file = s->source.substr(0, s->source.find(' '));
    EXPECT_NE(ReadAll(CorpusDir() + "/" + file).find(tok.Decode(all)), std::string::npos) << s->source;
    auto again = corpus->Sample(500, 32, i, 3);
    EXPECT_EQ(again->context, s->context);
    auto other_seed = corpus->Sample(500, 32, i, 4);
    EXPECT_NE(other_seed->context, s->context);
  }
}

TEST(TextCorpusTest, ErrorsNameTheFolderAndTheLength) {
  const Tokenizer& tok = *testing::SmolLm2Tokenizer();
  auto missing = TextCorpus::Load("/nonexistent/corpus", tok);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/corpus"), std::string::npos);
  auto corpus = TextCorpus::Load(CorpusDir(), tok);
  ASSERT_TRUE(corpus.ok());
  auto too_long = corpus->Sample(1000000, 64, 0, 0);
  EXPECT_NE(too_long.status().message().find("1000000-token context"), std::string::npos) << too_long.status();
}

TEST(TextCorpusTest, DefaultFolderIsTheSourceTreeCorpus) {
  EXPECT_TRUE(std::filesystem::equivalent(DefaultCorpusDir(), CorpusDir()) ||
              std::filesystem::equivalent(DefaultCorpusDir(), "tests/data/corpus"));
}

}  // namespace
}  // namespace kvserve
