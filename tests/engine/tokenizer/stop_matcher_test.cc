// StopMatcher as a streaming client sees it: stop strings are cut even when split over
// pushes, nothing that could still be a stop string is shown early, and nothing is lost.
#include "engine/tokenizer/stop_matcher.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kvserve {
namespace {

// Pushes each chunk, returns everything emitted (including Flush if never stopped).
struct Streamed {
  std::string text;
  bool stopped = false;
};
Streamed Stream(std::vector<std::string> stops, const std::vector<std::string>& chunks) {
  StopMatcher m(std::move(stops));
  Streamed r;
  for (const std::string& c : chunks) {
    StopMatcher::Result res = m.Push(c);
    r.text += res.emit;
    if (res.stopped) {
      r.stopped = true;
      return r;
    }
  }
  r.text += m.Flush();
  return r;
}

TEST(StopMatcher, StopInsideOnePushCutsBeforeIt) {
  StopMatcher m({"</s>"});
  const StopMatcher::Result r = m.Push("hello</s>world");
  EXPECT_EQ(r.emit, "hello");
  EXPECT_TRUE(r.stopped);
  // Later pushes stay stopped and emit nothing.
  const StopMatcher::Result after = m.Push("more");
  EXPECT_TRUE(after.stopped);
  EXPECT_EQ(after.emit, "");
  EXPECT_EQ(m.Flush(), "");
}

TEST(StopMatcher, StopSplitAcrossPushesIsHeldThenCut) {
  StopMatcher m({"STOP"});
  StopMatcher::Result r = m.Push("abc ST");
  EXPECT_EQ(r.emit, "abc ");  // "ST" might start STOP: held back
  EXPECT_FALSE(r.stopped);
  r = m.Push("O");
  EXPECT_EQ(r.emit, "");
  EXPECT_FALSE(r.stopped);
  r = m.Push("P tail");
  EXPECT_EQ(r.emit, "");
  EXPECT_TRUE(r.stopped);

  EXPECT_EQ(Stream({"STOP"}, {"x", "S", "T", "O", "P", "y"}).text, "x");
  EXPECT_TRUE(Stream({"STOP"}, {"x", "S", "T", "O", "P", "y"}).stopped);
}

TEST(StopMatcher, OverlappingPrefixes) {
  // "abab" then "c": the match starts at the second "ab", so the first one is shown.
  StopMatcher m({"abc"});
  StopMatcher::Result r = m.Push("abab");
  EXPECT_EQ(r.emit, "ab");
  EXPECT_FALSE(r.stopped);
  r = m.Push("c");
  EXPECT_EQ(r.emit, "");
  EXPECT_TRUE(r.stopped);

  const Streamed run = Stream({"abc"}, {"a", "b", "a", "b", "c"});
  EXPECT_EQ(run.text, "ab");
  EXPECT_TRUE(run.stopped);
  // A self-overlapping stop string.
  const Streamed run2 = Stream({"aab"}, {"a", "a", "a", "b"});
  EXPECT_EQ(run2.text, "a");
  EXPECT_TRUE(run2.stopped);
}

TEST(StopMatcher, NearMissIsNotAStopAndIsEventuallyShown) {
  StopMatcher m({"abc"});
  StopMatcher::Result r = m.Push("ab");
  EXPECT_EQ(r.emit, "");
  r = m.Push("d");  // "abd" can no longer become "abc"
  EXPECT_EQ(r.emit, "abd");
  EXPECT_FALSE(r.stopped);

  const Streamed run = Stream({"abc", "\n\n"}, {"a", "b", "x ", "\n", "ab", "\n"});
  EXPECT_EQ(run.text, "abx \nab\n");
  EXPECT_FALSE(run.stopped);
}

TEST(StopMatcher, FlushReturnsHeldBackText) {
  StopMatcher m({"<|end|>"});
  const StopMatcher::Result r = m.Push("answer <|en");
  EXPECT_EQ(r.emit, "answer ");
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(m.Flush(), "<|en");
  EXPECT_EQ(m.Flush(), "");
}

TEST(StopMatcher, EarliestOfSeveralStopsWins) {
  const Streamed run = Stream({"world", "lo w"}, {"hel", "lo wor", "ld"});
  EXPECT_EQ(run.text, "hel");
  EXPECT_TRUE(run.stopped);
  // A longer stop whose prefix is held must not delay a shorter one that completes.
  const Streamed run2 = Stream({"abcdef", "bc"}, {"a", "b", "c", "d"});
  EXPECT_EQ(run2.text, "a");
  EXPECT_TRUE(run2.stopped);
}

TEST(StopMatcher, NoStopsOrEmptyStopPassesEverythingThrough) {
  StopMatcher m({""});
  const StopMatcher::Result r = m.Push("anything");
  EXPECT_EQ(r.emit, "anything");
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(Stream({}, {"a", "b"}).text, "ab");
}

}  // namespace
}  // namespace kvserve
