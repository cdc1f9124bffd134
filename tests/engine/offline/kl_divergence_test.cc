// MeanKlDivergence against values worked out by hand.
#include "engine/offline/kl_divergence.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace kvserve {
namespace {

TEST(KlDivergenceTest, IdenticalLogitsGiveExactlyZero) {
  const std::vector<float> a = {1.5f, -2.0f, 0.25f, 9.0f, 3.0f, 3.0f};
  EXPECT_EQ(MeanKlDivergence(a, a, 3), 0.0);
}

TEST(KlDivergenceTest, MatchesTheClosedFormAndAveragesRows) {
  // Row 0: p = (1/4, 3/4), q = (1/2, 1/2). Row 1: p == q (shifted logits).
  const std::vector<float> full = {0.0f, static_cast<float>(std::log(3.0)), 1.0f, 2.0f};
  const std::vector<float> comp = {5.0f, 5.0f, 11.0f, 12.0f};
  const double row0 = 0.25 * std::log(0.5) + 0.75 * std::log(1.5);
  EXPECT_NEAR(MeanKlDivergence(full, comp, 2), row0 / 2, 1e-7);
  // Not symmetric: KL(q || p) differs.
  EXPECT_GT(std::fabs(MeanKlDivergence(comp, full, 2) - row0 / 2), 1e-3);
}

}  // namespace
}  // namespace kvserve
