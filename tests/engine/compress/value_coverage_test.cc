// The value-coverage curve behind auto:RISK: values in a few clusters are covered by few
// representatives, spread-out values are not; the curve falls from ~2 to 0; the reservoir
// samples the stream uniformly; reading the curve at k maps k onto the sample.
#include "engine/compress/value_coverage.h"

#include <random>

#include "gtest/gtest.h"

namespace kvserve {
namespace {

std::vector<float> Values(int64_t n, int64_t d, int clusters, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::normal_distribution<float> g;
  std::vector<float> centers(static_cast<size_t>(std::max(clusters, 1) * d));
  for (float& x : centers) x = 3 * g(rng);
  std::vector<float> v(static_cast<size_t>(n * d));
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t a = 0; a < d; ++a) {
      // clusters == 0: every value its own Gaussian draw.
      v[j * d + a] = clusters > 0 ? centers[(j % clusters) * d + a] + 0.01f * g(rng) : g(rng);
    }
  }
  return v;
}

TEST(ValueCoverageTest, FewClustersAreCoveredByFewRepresentativesSpreadValuesAreNot) {
  const int64_t n = 128, d = 16;
  const std::vector<double> clustered = UnexplainedValueShare(Values(n, d, 8, 1).data(), n, d, 3);
  const std::vector<double> spread = UnexplainedValueShare(Values(n, d, 0, 2).data(), n, d, 3);
  ASSERT_EQ(clustered.size(), 8u);  // 1, 2, 4, ..., 128 representatives
  ASSERT_EQ(spread.size(), 8u);
  for (const auto* c : {&clustered, &spread}) {
    EXPECT_GT((*c)[0], 1.0);  // one random representative: about twice the variance
    EXPECT_LT((*c)[0], 4.0);
    for (size_t i = 1; i < c->size(); ++i) EXPECT_LE((*c)[i], (*c)[i - 1]) << i;
    EXPECT_EQ(c->back(), 0.0);
  }
  EXPECT_LT(clustered[6], 0.01);  // 64 representatives hit all 8 clusters
  EXPECT_GT(spread[6], 0.2);      // half the entries still leave a fifth of the variance
  EXPECT_TRUE(UnexplainedValueShare(Values(1, d, 0, 2).data(), 1, d, 3).empty());
}

TEST(ValueCoverageTest, ReservoirSamplesTheStreamUniformlyAndReproducibly) {
  const int64_t stream = 20000, cap = 128;
  auto run = [&](uint64_t seed) {
    ValueReservoir r(2, 1, cap, seed);
    for (int64_t t = 0; t < stream; ++t) {
      const float a = static_cast<float>(t), b = static_cast<float>(-t);
      const float* heads[2] = {&a, &b};
      r.Offer(heads);
    }
    EXPECT_EQ(r.seen(), stream);
    EXPECT_EQ(r.size(), cap);
    return std::vector<float>(r.head(0), r.head(0) + cap);
  };
  const std::vector<float> s = run(5);
  EXPECT_EQ(s, run(5));
  EXPECT_NE(s, run(6));
  double mean = 0;
  int64_t late = 0;
  for (float x : s) {
    mean += x / cap;
    late += x >= stream / 2;
  }
  // Uniform over [0, 20000): mean 10000 with sd ~ 5770 / sqrt(128) = 510.
  EXPECT_NEAR(mean, stream / 2.0, 2000);
  EXPECT_GT(late, cap / 4);  // not stuck on the first entries
  ValueReservoir r(2, 1, cap, 5);
  for (int64_t t = 0; t < stream; ++t) {
    const float a = static_cast<float>(t), b = static_cast<float>(-t);
    const float* heads[2] = {&a, &b};
    r.Offer(heads);
  }
  for (int64_t i = 0; i < cap; ++i) EXPECT_EQ(r.head(1)[i], -r.head(0)[i]);  // one decision for all heads
}

TEST(ValueCoverageTest, ReadingTheCurveMapsKOntoTheSample) {
  const std::vector<double> curve = {2.0, 1.0, 0.5, 0.0};  // 1, 2, 4, 8 representatives of 8
  EXPECT_DOUBLE_EQ(UnexplainedAt(curve, 8, 800, 100), 2.0);   // 1 of 8
  EXPECT_DOUBLE_EQ(UnexplainedAt(curve, 8, 800, 200), 1.0);   // 2 of 8
  EXPECT_DOUBLE_EQ(UnexplainedAt(curve, 8, 800, 300), 0.75);  // halfway from 2 to 4
  EXPECT_DOUBLE_EQ(UnexplainedAt(curve, 8, 800, 799), curve[2] * (1 - 0.9975) + 0.0);
  EXPECT_EQ(UnexplainedAt(curve, 8, 800, 800), 0.0);
  EXPECT_EQ(UnexplainedAt(curve, 8, 800, 5), 2.0);  // below one sample entry: the first point
  EXPECT_EQ(UnexplainedAt({}, 0, 0, 5), 0.0);
}

}  // namespace
}  // namespace kvserve
