// Logprobs on token events: the log-softmax of the raw logits, the top-n best first.
#include <cmath>

#include "engine/scheduler/scheduler.h"
#include "gtest/gtest.h"

namespace kvserve {
namespace {

TEST(TokenLogprobsTest, LogSoftmaxOfTheRawLogitsBestFirst) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f};
  const double lse = std::log(std::exp(1.0) + 2 * std::exp(3.0) + std::exp(2.0));
  StreamEvent e;
  TokenLogprobs(logits, 2, 3, &e);
  EXPECT_NEAR(e.logprob, 2.0 - lse, 1e-6);
  ASSERT_EQ(e.top_logprobs.size(), 3u);
  // Ties go to the lower id.
  EXPECT_EQ(e.top_logprobs[0].first, 1);
  EXPECT_EQ(e.top_logprobs[1].first, 3);
  EXPECT_EQ(e.top_logprobs[2].first, 2);
  EXPECT_NEAR(e.top_logprobs[0].second, 3.0 - lse, 1e-6);
  EXPECT_NEAR(e.top_logprobs[2].second, e.logprob, 1e-7);
  TokenLogprobs(logits, 0, 10, &e);
  EXPECT_EQ(e.top_logprobs.size(), 4u) << "capped at the vocabulary";
}

}  // namespace
}  // namespace kvserve
