// Sampler::SampleFromTopK against Sampler::Sample: fed the row's top-k candidates (the CPU
// reference of the device kernel), it must give the identical token stream, draw for draw,
// and say so when it cannot.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "engine/model/sampler.h"
#include "engine/model/sampling_params.h"
#include "kernels/cpu/row_topk.h"

namespace kvserve {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// The kinds of rows a model (or a constrained decoder) produces.
enum class RowKind { kSmooth, kTied, kMasked, kFewFinite };

std::vector<float> MakeRow(std::mt19937& rng, int64_t vocab, RowKind kind, int32_t top_k) {
  std::normal_distribution<float> normal(0.0f, 2.5f);
  std::vector<float> row(static_cast<size_t>(vocab));
  for (float& x : row) x = normal(rng);
  if (kind == RowKind::kTied) {
    for (float& x : row) x = std::round(x * 2.0f) / 2.0f;  // many equal logits at every rank
  } else if (kind == RowKind::kMasked) {
    std::uniform_int_distribution<int> c(0, 9);
    for (float& x : row) {
      const int v = c(rng);
      if (v < 3) x = -kInf;
      if (v == 3) x = std::nanf("");
    }
  } else if (kind == RowKind::kFewFinite) {
    // Exactly top_k - 1, top_k or top_k + 1 finite logits: where Sample switches between
    // applying top-k (Better() order) and not (id order).
    std::uniform_int_distribution<int> d(-1, 1);
    const int64_t finite = std::max<int64_t>(1, top_k + d(rng));
    std::vector<int64_t> keep(static_cast<size_t>(vocab));
    for (int64_t i = 0; i < vocab; ++i) keep[i] = i;
    std::shuffle(keep.begin(), keep.end(), rng);
    std::vector<float> masked(static_cast<size_t>(vocab), -kInf);
    for (int64_t i = 0; i < std::min(finite, vocab); ++i) masked[keep[i]] = std::round(row[keep[i]]);
    row = masked;
  }
  return row;
}

struct Candidates {
  std::vector<int32_t> ids;
  std::vector<float> vals;
};

Candidates TopK(const std::vector<float>& row, int64_t k) {
  Candidates c{std::vector<int32_t>(static_cast<size_t>(k)), std::vector<float>(static_cast<size_t>(k))};
  cpu::RowTopK(row.data(), 1, static_cast<int64_t>(row.size()), k, c.ids.data(), c.vals.data());
  return c;
}

TEST(SamplerTopK, CandidatesGiveTheSameTokenStreamAsTheFullRow) {
  const int64_t vocab = 3000;
  const RowKind kinds[] = {RowKind::kSmooth, RowKind::kTied, RowKind::kMasked, RowKind::kFewFinite};
  const int32_t top_ks[] = {1, 2, 5, 17, 40, 64};
  const float top_ps[] = {0.1f, 0.5f, 0.9f, 1.0f};
  const float min_ps[] = {0.0f, 0.05f, 0.3f};
  const float temps[] = {0.3f, 0.7f, 1.0f, 1.5f};
  int draws = 0, non_top = 0;
  uint64_t seed = 1;
  std::mt19937 rng(11);
  for (int32_t top_k : top_ks) {
    for (float top_p : top_ps) {
      for (float min_p : min_ps) {
        for (float t : temps) {
          SamplingParams p;
          p.temperature = t;
          p.top_k = top_k;
          p.top_p = top_p;
          p.min_p = min_p;
          p.seed = seed++;
          Sampler full(p), from_topk(p);
          const int64_t k = Sampler::TopKCandidatesNeeded(p, vocab);
          ASSERT_EQ(k, top_k + 1);
          const std::string where = "top_k " + std::to_string(top_k) + " top_p " + std::to_string(top_p) +
                                    " min_p " + std::to_string(min_p) + " T " + std::to_string(t);
          for (RowKind kind : kinds) {
            const std::vector<float> row = MakeRow(rng, vocab, kind, top_k);
            const Candidates c = TopK(row, k);
            const int32_t want = full.Sample(row, {});
            const std::optional<int32_t> got = from_topk.SampleFromTopK(c.ids, c.vals, vocab);
            ASSERT_TRUE(got.has_value()) << where << " kind " << static_cast<int>(kind);
            ASSERT_EQ(*got, want) << where << " kind " << static_cast<int>(kind) << " draw " << draws;
            non_top += want != c.ids[0];
            ++draws;
          }
        }
      }
    }
  }
  EXPECT_EQ(draws, 6 * 4 * 3 * 4 * 4);
  EXPECT_GT(non_top, draws / 5) << "the draws must not be mostly greedy, or the test proves little";
}

// Long streams with one Sampler pair per parameter set: any extra or missing PRNG draw, or
// an order difference, shows up as a diverging stream.
TEST(SamplerTopK, LongStreamsStayIdenticalAcrossSeeds) {
  const int64_t vocab = 32000;
  std::mt19937 rng(3);
  std::uniform_int_distribution<int32_t> kdist(1, 64);
  std::uniform_real_distribution<float> pdist(0.1f, 1.0f), tdist(0.3f, 1.5f), mdist(0.0f, 0.2f);
  int draws = 0;
  for (uint64_t seed = 100; seed < 120; ++seed) {
    SamplingParams p;
    p.top_k = kdist(rng);
    p.top_p = seed % 4 == 0 ? 1.0f : pdist(rng);
    p.min_p = seed % 3 == 0 ? mdist(rng) : 0.0f;
    p.temperature = tdist(rng);
    p.seed = seed;
    Sampler full(p), from_topk(p);
    const int64_t k = Sampler::TopKCandidatesNeeded(p, vocab);
    for (int step = 0; step < 100; ++step) {
      const RowKind kind = static_cast<RowKind>(step % 4);
      const std::vector<float> row = MakeRow(rng, vocab, kind, p.top_k);
      const Candidates c = TopK(row, k);
      const int32_t want = full.Sample(row, {});
      const std::optional<int32_t> got = from_topk.SampleFromTopK(c.ids, c.vals, vocab);
      ASSERT_TRUE(got.has_value()) << "seed " << seed << " step " << step;
      ASSERT_EQ(*got, want) << "seed " << seed << " step " << step << " top_k " << p.top_k << " top_p " << p.top_p
                            << " min_p " << p.min_p << " T " << p.temperature;
      ++draws;
    }
  }
  EXPECT_EQ(draws, 2000);
}

TEST(SamplerTopK, GreedyNeedsOneCandidateAndNoDraw) {
  SamplingParams p;  // temperature 0
  EXPECT_EQ(Sampler::TopKCandidatesNeeded(p, 1000), 1);
  std::mt19937 rng(9);
  Sampler full(p), from_topk(p);
  for (RowKind kind : {RowKind::kSmooth, RowKind::kTied, RowKind::kMasked}) {
    const std::vector<float> row = MakeRow(rng, 1000, kind, 1);
    const Candidates c = TopK(row, 1);
    EXPECT_EQ(from_topk.SampleFromTopK(c.ids, c.vals, 1000), full.Sample(row, {}));
  }
  // A fully masked row: Sample returns id 0, and so does the first candidate.
  const std::vector<float> masked(50, -kInf);
  const Candidates c = TopK(masked, 1);
  p.temperature = 1.0f;
  p.top_k = 5;
  Sampler hot(p);
  EXPECT_EQ(hot.SampleFromTopK(c.ids, c.vals, 50), std::optional<int32_t>(0));
}

TEST(SamplerTopK, SaysWhenItCannotBeExactAndLeavesThePrngAlone) {
  const int64_t vocab = 500;
  std::mt19937 rng(21);
  const std::vector<float> row = MakeRow(rng, vocab, RowKind::kSmooth, 8);
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_k = 8;
  p.seed = 5;

  // top_k candidates only, all finite: the row may have exactly top_k finite logits or more.
  Sampler full(p), from_topk(p);
  const Candidates exact_k = TopK(row, 8);
  EXPECT_EQ(from_topk.SampleFromTopK(exact_k.ids, exact_k.vals, vocab), std::nullopt);
  // ...unless the vocab is that small.
  const std::vector<float> small(row.begin(), row.begin() + 8);
  const Candidates all = TopK(small, 8);
  Sampler small_full(p), small_topk(p);
  EXPECT_EQ(small_topk.SampleFromTopK(all.ids, all.vals, 8), std::optional<int32_t>(small_full.Sample(small, {})));
  // Fewer candidates than top_k.
  const Candidates few = TopK(row, 4);
  EXPECT_EQ(from_topk.SampleFromTopK(few.ids, few.vals, vocab), std::nullopt);
  // None of the refusals drew a number: the streams still agree.
  const Candidates enough = TopK(row, Sampler::TopKCandidatesNeeded(p, vocab));
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(from_topk.SampleFromTopK(enough.ids, enough.vals, vocab), std::optional<int32_t>(full.Sample(row, {})));

  // Top-k off, penalties on, a +inf logit.
  SamplingParams off = p;
  off.top_k = 0;
  EXPECT_EQ(Sampler::TopKCandidatesNeeded(off, vocab), 0);
  EXPECT_EQ(Sampler(off).SampleFromTopK(enough.ids, enough.vals, vocab), std::nullopt);
  off.top_k = static_cast<int32_t>(vocab);  // acts as off
  EXPECT_EQ(Sampler::TopKCandidatesNeeded(off, vocab), 0);
  for (int which = 0; which < 3; ++which) {
    SamplingParams pen = p;
    (which == 0 ? pen.repetition_penalty : which == 1 ? pen.presence_penalty : pen.frequency_penalty) = 1.2f;
    EXPECT_EQ(Sampler::TopKCandidatesNeeded(pen, vocab), 0) << which;
    EXPECT_EQ(Sampler(pen).SampleFromTopK(enough.ids, enough.vals, vocab), std::nullopt) << which;
  }
  Candidates inf = enough;
  inf.vals[0] = kInf;
  EXPECT_EQ(Sampler(p).SampleFromTopK(inf.ids, inf.vals, vocab), std::nullopt);
}

}  // namespace
}  // namespace kvserve
