// Sampler and SamplingParams behaviour as a client sees it: greedy, reproducible seeds,
// the sampled distribution, the filters never leaking excluded tokens, penalties, validation.
#include "engine/model/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "engine/model/sampling_params.h"

namespace kvserve {
namespace {

// Deterministic pseudo-random logits (a plain LCG, independent of the sampler's PRNG).
std::vector<float> RandomLogits(size_t n, uint32_t seed, float scale = 4.0f) {
  std::vector<float> out(n);
  uint32_t x = seed * 2654435761u + 1;
  for (float& v : out) {
    x = x * 1664525u + 1013904223u;
    v = scale * (static_cast<float>(x >> 8) / 16777216.0f - 0.5f);
  }
  return out;
}

std::vector<double> Softmax(const std::vector<float>& logits, double t) {
  const double mx = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  for (size_t i = 0; i < p.size(); ++i) p[i] = std::exp((logits[i] - mx) / t);
  const double sum = std::accumulate(p.begin(), p.end(), 0.0);
  for (double& v : p) v /= sum;
  return p;
}

std::vector<double> Frequencies(Sampler& s, const std::vector<float>& logits, int draws) {
  std::vector<double> f(logits.size(), 0.0);
  for (int i = 0; i < draws; ++i) f[s.Sample(logits, {})] += 1.0 / draws;
  return f;
}

double MaxAbsDiff(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

TEST(Sampler, GreedyPicksArgmaxAndLowestIdOnTies) {
  Sampler s(SamplingParams{});
  EXPECT_EQ(s.Sample(std::vector<float>{0.1f, 3.0f, -2.0f, 2.9f}, {}), 1);
  EXPECT_EQ(s.Sample(std::vector<float>{1.0f, 5.0f, 5.0f, 5.0f}, {}), 1);
  const std::vector<float> big = RandomLogits(128 * 1024, 7);
  const auto argmax = std::max_element(big.begin(), big.end()) - big.begin();
  EXPECT_EQ(s.Sample(big, {}), argmax);
}

TEST(Sampler, MaskedAndNanLogitsAreNeverChosen) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const std::vector<float> logits = {ninf, std::nanf(""), 0.0f, ninf, 0.0f};
  SamplingParams p;
  p.temperature = 5.0f;
  Sampler s(p);
  for (int i = 0; i < 2000; ++i) {
    const int32_t t = s.Sample(logits, {});
    EXPECT_TRUE(t == 2 || t == 4) << t;
  }
}

TEST(Sampler, TopK1EqualsGreedyAtAnyTemperature) {
  for (float t : {0.01f, 0.7f, 1.0f, 3.0f, 100.0f}) {
    SamplingParams p;
    p.temperature = t;
    p.top_k = 1;
    p.seed = 42;
    Sampler s(p);
    Sampler greedy(SamplingParams{});
    for (uint32_t trial = 0; trial < 50; ++trial) {
      const std::vector<float> logits = RandomLogits(1000, trial);
      EXPECT_EQ(s.Sample(logits, {}), greedy.Sample(logits, {})) << "T=" << t;
    }
  }
}

TEST(Sampler, SameSeedReproducesAndOtherSeedDiffers) {
  const std::vector<float> logits(256, 0.0f);  // uniform: every draw is pure PRNG
  auto run = [&](uint64_t seed) {
    SamplingParams p;
    p.temperature = 1.0f;
    p.seed = seed;
    Sampler s(p);
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i) out.push_back(s.Sample(logits, {}));
    return out;
  };
  EXPECT_EQ(run(1234), run(1234));
  EXPECT_EQ(run(0), run(0));
  EXPECT_NE(run(1234), run(1235));
  // Not a constant stream either.
  const std::vector<int32_t> a = run(99);
  EXPECT_GT(std::set<int32_t>(a.begin(), a.end()).size(), 30u);
}

TEST(Sampler, FrequenciesMatchSoftmaxOverTemperature) {
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f, 1.5f, 0.0f, 2.2f, -0.5f};
  for (float t : {0.5f, 1.0f, 2.0f}) {
    SamplingParams p;
    p.temperature = t;
    p.seed = 7;
    Sampler s(p);
    const int draws = 200000;
    const std::vector<double> f = Frequencies(s, logits, draws);
    const std::vector<double> want = Softmax(logits, t);
    // Chi-square with 7 degrees of freedom: 24.3 is the p = 0.001 critical value.
    double chi2 = 0;
    for (size_t i = 0; i < f.size(); ++i)
      chi2 += std::pow(f[i] * draws - want[i] * draws, 2) / (want[i] * draws);
    EXPECT_LT(chi2, 24.3) << "T=" << t;
    EXPECT_LT(MaxAbsDiff(f, want), 0.006) << "T=" << t;
  }
}

TEST(Sampler, TopKRenormalisesOverTheKBest) {
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f, 1.5f, 0.0f, 2.2f, -0.5f};
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 3;  // keeps ids 6, 1, 4
  Sampler s(p);
  const std::vector<double> f = Frequencies(s, logits, 100000);
  std::vector<double> want(logits.size(), 0.0);
  const std::vector<double> kept = Softmax({logits[6], logits[1], logits[4]}, 1.0);
  want[6] = kept[0];
  want[1] = kept[1];
  want[4] = kept[2];
  EXPECT_LT(MaxAbsDiff(f, want), 0.008);
}

TEST(Sampler, TopKOnLargeVocabOnlyReturnsTheKBest) {
  const std::vector<float> logits = RandomLogits(128 * 1024, 3, 20.0f);
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  const std::set<int32_t> top40(order.begin(), order.begin() + 40);
  SamplingParams p;
  p.temperature = 50.0f;  // flat enough that most of the 40 get drawn
  p.top_k = 40;
  Sampler s(p);
  std::set<int32_t> seen;
  for (int i = 0; i < 500; ++i) {
    const int32_t t = s.Sample(logits, {});
    ASSERT_TRUE(top40.count(t)) << t;
    seen.insert(t);
  }
  EXPECT_GT(seen.size(), 20u);
}

TEST(Sampler, TopPNeverReturnsTokensOutsideTheNucleus) {
  // probs 0.5, 0.3, 0.15, 0.05: top_p 0.7 keeps {0, 1} (0.5 < 0.7 <= 0.8).
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f),
                                     std::log(0.05f)};
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.7f;
  Sampler s(p);
  const std::vector<double> f = Frequencies(s, logits, 50000);
  EXPECT_EQ(f[2], 0.0);
  EXPECT_EQ(f[3], 0.0);
  EXPECT_NEAR(f[0], 0.5 / 0.8, 0.01);
  EXPECT_NEAR(f[1], 0.3 / 0.8, 0.01);
}

TEST(Sampler, TopPOnLargeVocabMatchesAFullSortNucleus) {
  // The sampler sorts the nucleus in growing chunks; check it against a plain full sort,
  // with a nucleus (hundreds of tokens) bigger than the first chunk.
  const std::vector<float> logits = RandomLogits(128 * 1024, 11, 12.0f);
  const float top_p = 0.5f;
  const std::vector<double> prob = Softmax(logits, 1.0);
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  std::set<int32_t> nucleus;
  double cum = 0;
  for (int32_t id : order) {
    nucleus.insert(id);
    cum += prob[id];
    if (cum >= top_p) break;
  }
  ASSERT_GT(nucleus.size(), 1000u);  // several chunks
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = top_p;
  Sampler s(p);
  for (int i = 0; i < 300; ++i) ASSERT_TRUE(nucleus.count(s.Sample(logits, {})));
}

TEST(Sampler, MinPDropsTokensBelowTheScaledMax) {
  // probs 0.4, 0.3, 0.15, 0.1, 0.05; min_p 0.3 => threshold 0.12: keeps {0, 1, 2}.
  const std::vector<float> logits = {std::log(0.4f), std::log(0.3f), std::log(0.15f),
                                     std::log(0.1f), std::log(0.05f)};
  SamplingParams p;
  p.temperature = 1.0f;
  p.min_p = 0.3f;
  Sampler s(p);
  const std::vector<double> f = Frequencies(s, logits, 50000);
  EXPECT_EQ(f[3], 0.0);
  EXPECT_EQ(f[4], 0.0);
  EXPECT_NEAR(f[0], 0.4 / 0.85, 0.01);
  EXPECT_NEAR(f[2], 0.15 / 0.85, 0.01);
}

TEST(Sampler, RepetitionPenaltyChangesTheArgmax) {
  SamplingParams p;
  p.repetition_penalty = 1.3f;
  Sampler s(p);
  // Positive logit divided: 2.0 / 1.3 = 1.54 < 1.9.
  EXPECT_EQ(s.Sample(std::vector<float>{2.0f, 1.9f}, std::vector<int32_t>{0}), 1);
  // Negative logit multiplied: -1.0 * 1.3 = -1.3 < -1.2 (dividing would have raised it).
  EXPECT_EQ(s.Sample(std::vector<float>{-1.0f, -1.2f}, std::vector<int32_t>{0, 0}), 1);
  // Unseen tokens and out-of-range ids are untouched.
  EXPECT_EQ(s.Sample(std::vector<float>{2.0f, 1.9f}, std::vector<int32_t>{5, -1}), 0);
}

TEST(Sampler, PresenceAndFrequencyPenaltiesCountOccurrences) {
  SamplingParams p;
  p.frequency_penalty = 0.4f;
  Sampler freq(p);
  // Token 0 seen 3 times: 2.0 - 1.2 = 0.8 < 1.0; token 1 seen once: 1.0 - 0.4 = 0.6.
  EXPECT_EQ(freq.Sample(std::vector<float>{2.0f, 1.0f, 0.7f}, std::vector<int32_t>{0, 1, 0, 0}), 0);
  EXPECT_EQ(freq.Sample(std::vector<float>{2.0f, 1.0f, 0.9f}, std::vector<int32_t>{0, 1, 0, 0}), 2);
  SamplingParams q;
  q.presence_penalty = 0.5f;
  Sampler pres(q);
  // Presence is a flat penalty however often the token appeared.
  EXPECT_EQ(pres.Sample(std::vector<float>{2.0f, 1.6f}, std::vector<int32_t>{0, 0, 0, 0}), 1);
  EXPECT_EQ(pres.Sample(std::vector<float>{2.0f, 1.4f}, std::vector<int32_t>{0, 0, 0, 0}), 0);
}

TEST(SamplingParams, DefaultsAreValid) {
  EXPECT_TRUE(ValidateSamplingParams(SamplingParams{}, 32000).ok());
}

TEST(SamplingParams, ValidationNamesFieldAndValue) {
  struct Case {
    SamplingParams p;
    std::string field, value;
  };
  auto with = [](auto set) {
    SamplingParams p;
    set(p);
    return p;
  };
  const std::vector<Case> cases = {
      {with([](SamplingParams& p) { p.temperature = -0.5f; }), "temperature", "-0.5"},
      {with([](SamplingParams& p) { p.temperature = INFINITY; }), "temperature", "inf"},
      {with([](SamplingParams& p) { p.top_k = -3; }), "top_k", "-3"},
      {with([](SamplingParams& p) { p.top_p = 0.0f; }), "top_p", "0"},
      {with([](SamplingParams& p) { p.top_p = 1.5f; }), "top_p", "1.5"},
      {with([](SamplingParams& p) { p.min_p = 2.0f; }), "min_p", "2"},
      {with([](SamplingParams& p) { p.min_p = NAN; }), "min_p", "nan"},
      {with([](SamplingParams& p) { p.repetition_penalty = 0.0f; }), "repetition_penalty", "0"},
      {with([](SamplingParams& p) { p.presence_penalty = INFINITY; }), "presence_penalty", "inf"},
      {with([](SamplingParams& p) { p.frequency_penalty = NAN; }), "frequency_penalty", "nan"},
  };
  for (const Case& c : cases) {
    const absl::Status st = ValidateSamplingParams(c.p, 32000);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_NE(st.message().find(c.field), std::string_view::npos) << st.message();
    EXPECT_NE(st.message().find(c.value), std::string_view::npos) << st.message();
  }
}

}  // namespace
}  // namespace kvserve
