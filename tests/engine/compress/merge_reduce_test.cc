// Merge-reduce buckets: memory stays within its bound over a long stream, the budget maps to
// the largest bucket size that fits, and a layer's reduction keeps per-head counts equal,
// the total weight of every head, and the recent window untouched.
#include "engine/compress/merge_reduce.h"


#include <cmath>
#include <random>

#include "engine/compress/random_sample_reducer.h"
#include "gtest/gtest.h"
#include "tests/engine/compress/layer_fixture.h"

namespace kvserve {
namespace {

TEST(MergeReduceBucketsTest, MemoryStaysWithinItsBoundOverALongStream) {
  std::mt19937 rng(1);
  std::uniform_int_distribution<int64_t> step(1, 300);
  for (int64_t max_level : {int64_t{2}, kMergeReduceMaxLevel, int64_t{40}}) {
    const MergeReduceShape shape{16, 24, max_level, /*sinks=*/4};
    MergeReduceBuckets b(shape);
    int64_t len = 0, seen = 0, reductions = 0;
    while (seen < 200000) {
      const int64_t n = step(rng);
      len += n;
      seen += n;
      len = b.Advance(len, [&](int64_t begin) {
        ++reductions;
        // A REDUCE only ever touches reduced buckets or raw entries, never the sinks or the window.
        EXPECT_GE(begin, shape.sinks);
        EXPECT_LE(begin + 2 * shape.k, len - shape.window);
        EXPECT_EQ((begin - shape.sinks) % shape.k, 0);
      });
      ASSERT_LE(len, MergeReduceBuckets::SteadyBound(shape, seen)) << "after " << seen;
      // O(k log n), and O(k) with the level cap.
      ASSERT_LE(len, shape.sinks + shape.k * (max_level + 1) + 2 * shape.k - 1 + shape.window);
      ASSERT_LE(len, shape.sinks + shape.k * (std::log2(static_cast<double>(seen)) + 1) + 2 * shape.k + shape.window);
      for (size_t i = 1; i < b.levels().size(); ++i) ASSERT_GT(b.levels()[i - 1], b.levels()[i]);
      ASSERT_FALSE(b.Due(len));
    }
    EXPECT_GT(reductions, 200000 / (2 * 16));
  }
}

TEST(MergeReduceBucketsTest, BudgetPicksTheLargestBucketThatFits) {
  for (int64_t n : {100, 1000, 7508, 131072}) {
    for (int64_t budget : {40, 128, 750, 4000}) {
      const MergeReduceShape s = MergeReduceShapeForBudget(budget, 32, n, /*sinks=*/4);
      if (n > budget && s.k > 1) {
        EXPECT_LE(MergeReduceBuckets::SteadyBound(s, n), budget) << n << " " << budget;
        MergeReduceShape bigger = s;
        ++bigger.k;
        EXPECT_GT(MergeReduceBuckets::SteadyBound(bigger, n), budget) << n << " " << budget;
      }
      if (n <= budget) {
        // Nothing is ever reduced.
        EXPECT_EQ(MergeReduceBuckets::SteadyBound(s, n), n);
        EXPECT_FALSE(MergeReduceBuckets(s).Due(n));
      }
    }
  }
}

TEST(MergeReduceBucketsTest, ShapeForPromptKeepsMoreOfThePromptWithinTheSameBound) {
  int64_t gained = 0;
  for (int64_t ctx : {1024, 2048, 4096, 7500}) {
    for (double frac : {0.1, 0.2, 0.3}) {
      const int64_t budget = static_cast<int64_t>(frac * static_cast<double>(ctx)), n = ctx + 64;
      const MergeReduceShape largest = MergeReduceShapeForBudget(budget, 8, n, 4);
      const MergeReduceShape s = MergeReduceShapeForPrompt(budget, 8, n, 4, ctx, 512);
      EXPECT_LE(MergeReduceBuckets::SteadyBound(s, n), budget) << ctx << " " << frac;
      EXPECT_LE(s.k, largest.k);
      const int64_t kept = EntriesAfterPrompt(s, ctx, 512), before = EntriesAfterPrompt(largest, ctx, 512);
      EXPECT_GE(kept, before) << ctx << " " << frac;
      gained += kept > before;
    }
  }
  EXPECT_GE(gained, 8);  // most settings keep strictly more
  // The case in the header: 2,048 tokens at 30%.
  EXPECT_EQ(EntriesAfterPrompt(MergeReduceShapeForBudget(614, 8, 2112, 4), 2048, 512), 248);
  EXPECT_EQ(EntriesAfterPrompt(MergeReduceShapeForPrompt(614, 8, 2112, 4, 2048, 512), 2048, 512), 433);
}

TEST(MergeReduceTest, ReduceLayerKeepsCountsWeightsAndTheWindow) {
  const int64_t len = 150, heads = 3, d = 8, window = 10;
  auto backend = MakeCpuBackend();
  LayerFixture f(len, heads, d);
  f.FillRandom(8);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  for (float& x : f.log_w) x = u(rng);
  f.Store();
  std::vector<double> total(heads, 0.0);
  for (int64_t s = 0; s < len; ++s) {
    for (int64_t h = 0; h < heads; ++h) total[h] += std::exp(static_cast<double>(f.log_w[s * heads + h]));
  }
  for (const char* kind : {"random", "cluster"}) {
    LayerFixture g(len, heads, d);
    g.k = f.k;
    g.v = f.v;
    g.log_w = f.log_w;
    g.Store();
    MergeReduce mr(MakeReducer(kind, 4), {MergeReduceShape{8, window, kMergeReduceMaxLevel}}, 11);
    const absl::StatusOr<int64_t> steps = mr.ReduceLayer(*backend, g.pool, g.seq, 0);
    ASSERT_TRUE(steps.ok()) << steps.status();
    // 140 raw entries outside the window: 8 REDUCEs of 16 -> 8, with carries 8 + 4 + 2 + 1.
    EXPECT_EQ(*steps, 15) << kind;
    const int64_t new_len = g.seq.layer_len[0];
    EXPECT_EQ(new_len, 8 + (140 - 128) + window) << kind;
    EXPECT_EQ(mr.buckets(0).levels(), std::vector<int32_t>{3}) << kind;
    const LayerKv L = g.layer();
    for (int64_t h = 0; h < heads; ++h) {
      double kept = 0;
      for (int64_t s = 0; s < new_len; ++s) kept += std::exp(static_cast<double>(L.LogWeight(s, h)));
      EXPECT_NEAR(kept, total[h], 1e-4 * total[h]) << kind << " head " << h;
      for (int64_t i = 0; i < window + 12; ++i) {  // raw entries and the window move unchanged
        const int64_t src = len - 1 - i, dst = new_len - 1 - i;
        EXPECT_EQ(L.LogWeight(dst, h), f.log_w[src * heads + h]);
        EXPECT_EQ(L.Key(dst, h)[0], f.k[(src * heads + h) * d]);
      }
    }
    EXPECT_TRUE(g.pool.CheckInvariants().ok());
  }
}

TEST(MergeReduceTest, SinksAreNeverReduced) {
  // The first entries carry most of the attention in real models; a REDUCE must not move
  // their mass onto other keys, so they stay first, with their own weight, at every step.
  const int64_t len = 150, heads = 2, d = 8, window = 10, sinks = 4;
  auto backend = MakeCpuBackend();
  for (const char* kind : {"random", "cluster"}) {
    LayerFixture g(len, heads, d);
    g.FillRandom(9);
    g.Store();
    const std::vector<float> k0 = g.k;
    MergeReduce mr(MakeReducer(kind, 4), {MergeReduceShape{8, window, kMergeReduceMaxLevel, sinks}}, 5);
    ASSERT_TRUE(mr.ReduceLayer(*backend, g.pool, g.seq, 0).ok());
    // 136 raw entries outside sinks and window: 8 REDUCEs of 16 -> one level-3 bucket.
    EXPECT_EQ(g.seq.layer_len[0], sinks + 8 + (136 - 128) + window) << kind;
    const LayerKv L = g.layer();
    for (int64_t s = 0; s < sinks; ++s) {
      for (int64_t h = 0; h < heads; ++h) {
        EXPECT_EQ(L.LogWeight(s, h), 0.0f) << kind;
        EXPECT_EQ(L.Key(s, h)[0], k0[(s * heads + h) * d]) << kind;
      }
    }
  }
}

TEST(MergeReduceShapeTest, AHugeBudgetIsBoundedByTheSequenceNotSearchedToIt) {
  // A request once set a budget of 3e9 and spun here for a minute under the engine lock.
  const MergeReduceShape s = MergeReduceShapeForPrompt(3'000'000'000, 8, 2112, 4, 2048, 512);
  EXPECT_LE(s.k, 2112);  // the search starts at the sequence's length
  // It keeps the whole prompt, as a budget past the sequence means.
  EXPECT_EQ(EntriesAfterPrompt(s, 2048, 512), 2048);
  EXPECT_EQ(EntriesAfterPrompt(MergeReduceShapeForPrompt(2112, 8, 2112, 4, 2048, 512), 2048, 512), 2048);
}

}  // namespace
}  // namespace kvserve
