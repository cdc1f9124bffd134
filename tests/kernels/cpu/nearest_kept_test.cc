// cpu::NearestKept (the vectorized scan MergeEvictedWeightsBlas uses to find each evicted
// entry's nearest kept key) against the plain scan it replaces: the first smallest sum wins,
// across lanes and the tail, with ties, NaN and infinities, for every k around the lane width.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/kv_compress_ops.h"

namespace kvserve {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

int64_t PlainScan(const std::vector<float>& sq, const std::vector<float>& dots) {
  int64_t to = 0;
  float best = kInf;
  for (size_t i = 0; i < sq.size(); ++i) {
    const float dist = sq[i] + dots[i];
    if (dist < best) {
      best = dist;
      to = static_cast<int64_t>(i);
    }
  }
  return to;
}

TEST(NearestKeptTest, FirstSmallestLikeThePlainScan) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> few(0, 3);  // a handful of values: ties everywhere
  std::normal_distribution<float> wide(0.0f, 10.0f);
  int ties_checked = 0;
  for (int64_t k = 0; k <= 70; ++k) {
    for (int trial = 0; trial < 40; ++trial) {
      std::vector<float> sq(static_cast<size_t>(k)), dots(static_cast<size_t>(k));
      for (int64_t i = 0; i < k; ++i) {
        if (trial % 2 == 0) {
          sq[i] = static_cast<float>(few(rng));
          dots[i] = -static_cast<float>(few(rng));
        } else {
          sq[i] = std::fabs(wide(rng));
          dots[i] = wide(rng);
        }
        if (trial % 5 == 1 && i % 7 == 3) dots[i] = std::numeric_limits<float>::quiet_NaN();
        if (trial % 5 == 2 && i % 3 == 0) sq[i] = kInf;
      }
      const int64_t want = PlainScan(sq, dots);
      ASSERT_EQ(cpu::NearestKept(sq.data(), dots.data(), k), want) << "k " << k << " trial " << trial;
      ties_checked += trial % 2 == 0 && k > 8;
    }
  }
  EXPECT_GT(ties_checked, 1000);
}

TEST(NearestKeptTest, NothingBelowInfinityGivesTheFirstEntry) {
  for (int64_t k : {1, 8, 16, 33}) {
    std::vector<float> sq(static_cast<size_t>(k), kInf), dots(static_cast<size_t>(k), 0.0f);
    for (int64_t i = 0; i < k; i += 2) dots[i] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_EQ(cpu::NearestKept(sq.data(), dots.data(), k), 0) << "k " << k;
  }
  // The smallest entry last in the tail, and in the last lane of a full block.
  std::vector<float> sq(37, 1.0f), dots(37, 0.0f);
  dots[36] = -0.5f;
  EXPECT_EQ(cpu::NearestKept(sq.data(), dots.data(), 37), 36);
  dots[36] = 0.0f;
  dots[31] = -0.5f;
  dots[15] = -0.5f;
  EXPECT_EQ(cpu::NearestKept(sq.data(), dots.data(), 37), 15);
}

}  // namespace
}  // namespace kvserve
