// SnapKV scores (the CPU backend's Backend::SnapKvScores) against a dense double-precision
// reference written from the paper's definition, and on hand-made tensors where the right
// selection is known.
#include "engine/compress/snapkv_policy.h"

#include <cmath>

#include "engine/compress/basic_policies.h"
#include "tests/engine/compress/layer_fixture.h"

namespace kvserve {
namespace {

// Dense reference: scores [kv_heads, len].
std::vector<double> ReferenceSnapKv(const LayerFixture& f, int64_t len, int64_t kvh, int64_t d,
                                    const std::vector<float>& q, int64_t wl, int64_t n_heads, double scale,
                                    int64_t kernel) {
  const int64_t w = std::min(wl, len), m = len - w, group = n_heads / kvh;
  std::vector<double> probs(static_cast<size_t>(n_heads * m), 0.0);
  for (int64_t h = 0; h < n_heads; ++h) {
    const int64_t g = h / group;
    for (int64_t i = 0; i < w; ++i) {
      const float* qi = &q[((wl - w + i) * n_heads + h) * d];
      std::vector<double> logit(static_cast<size_t>(m + i + 1));
      double mx = -1e300;
      for (int64_t s = 0; s <= m + i; ++s) {
        double dot = 0;
        for (int64_t e = 0; e < d; ++e) dot += static_cast<double>(qi[e]) * f.k[(s * kvh + g) * d + e];
        logit[s] = dot * scale + f.log_w[s * kvh + g];
        mx = std::max(mx, logit[s]);
      }
      double sum = 0;
      for (double& x : logit) sum += (x = std::exp(x - mx));
      for (int64_t s = 0; s < m; ++s) probs[h * m + s] += logit[s] / sum / static_cast<double>(w);
    }
  }
  std::vector<double> scores(static_cast<size_t>(kvh * len), 0.0);
  for (int64_t h = 0; h < n_heads; ++h) {
    for (int64_t s = 0; s < m; ++s) {
      double pooled = 0;
      for (int64_t t = s - kernel / 2; t <= s + kernel / 2; ++t) {
        if (t >= 0 && t < m) pooled += probs[h * m + t];
      }
      scores[(h / group) * len + s] += pooled / static_cast<double>(kernel) / static_cast<double>(group);
    }
  }
  return scores;
}

struct Case {
  int64_t len, kvh, group, d, window, kernel, page;
};

class SnapKvReferenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(SnapKvReferenceTest, ScoresMatchTheDenseReference) {
  const Case c = GetParam();
  LayerFixture f(c.len, c.kvh, c.d, c.page);
  f.FillRandom(7);
  std::mt19937 rng(11);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (float& x : f.log_w) x = 0.3f * n(rng);
  f.Store();
  const int64_t n_heads = c.kvh * c.group;
  std::vector<float> q(static_cast<size_t>(c.window * n_heads * c.d));
  for (float& x : q) x = n(rng);
  SelectionRequest r;
  r.layer = f.layer();
  r.window = q;
  r.window_len = c.window;
  r.n_heads = n_heads;
  r.scale = 1.0f / std::sqrt(static_cast<float>(c.d));
  auto backend = MakeCpuBackend();
  const int64_t w = std::min(c.window, c.len);
  std::vector<float> got(static_cast<size_t>(c.kvh * c.len));
  backend->SnapKvScores(r.layer.kv, r.layer.pages.data(), c.len, q.data() + (c.window - w) * n_heads * c.d, w,
                        AttentionShape{n_heads, r.scale}, c.kernel, got.data());
  const std::vector<double> want = ReferenceSnapKv(f, c.len, c.kvh, c.d, q, c.window, n_heads, r.scale, c.kernel);
  const int64_t m = c.len - std::min(c.window, c.len);
  ASSERT_EQ(got.size(), want.size());
  float best = 0;
  for (int64_t g = 0; g < c.kvh; ++g) {
    for (int64_t s = 0; s < m; ++s) {
      EXPECT_NEAR(got[g * c.len + s], want[g * c.len + s], 1e-6 + 1e-4 * want[g * c.len + s]) << "head " << g << " slot " << s;
      best = std::max(best, got[g * c.len + s]);
    }
  }
  // The window's own entries outrank everything else.
  for (int64_t g = 0; g < c.kvh; ++g) {
    for (int64_t s = m; s < c.len; ++s) EXPECT_GT(got[g * c.len + s], best);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, SnapKvReferenceTest,
                         ::testing::Values(Case{40, 1, 1, 8, 8, 5, 4}, Case{67, 2, 3, 16, 16, 5, 16},
                                           Case{130, 3, 3, 64, 64, 5, 16}, Case{10, 2, 2, 8, 16, 3, 4},
                                           Case{33, 1, 4, 8, 1, 1, 7}));

TEST(SnapKvPolicyTest, KeepsTheEntryTheWindowAttendsToAndTheWindow) {
  // One head, 24 slots; the last 4 queries point at slot 5 and nothing else stands out.
  const int64_t len = 24, d = 8, w = 4;
  LayerFixture f(len, 1, d);
  for (int64_t s = 0; s < len; ++s) {
    for (int64_t e = 0; e < d; ++e) f.k[s * d + e] = 0.01f * static_cast<float>((s * 7 + e) % 5);
  }
  for (int64_t e = 0; e < d; ++e) f.k[5 * d + e] = (e == 0) ? 4.0f : 0.0f;
  f.Store();
  std::vector<float> q(static_cast<size_t>(w * d), 0.0f);
  for (int64_t i = 0; i < w; ++i) q[i * d] = 3.0f;
  SelectionRequest r;
  r.layer = f.layer();
  r.window = q;
  r.window_len = w;
  r.n_heads = 1;
  r.scale = 1.0f;
  r.n_keep = w + 1;
  auto backend = MakeCpuBackend();
  SnapKvPolicy snapkv("snapkv", 1);
  const Selection sel = snapkv.Select(r, *backend);
  EXPECT_EQ(sel.slots, (std::vector<int32_t>{5, 20, 21, 22, 23}));
}

// A pool wider than a quarter of what a head keeps is narrowed to the largest odd number
// within it, so a short prompt's selection is not one smoothed span (the default pool of 31
// made SmolLM2 write 'HHHH' for a 40-token chat prompt at 50%).
TEST(SnapKvPolicyTest, ThePoolIsNarrowedToAQuarterOfWhatIsKept) {
  EXPECT_EQ(PoolKernelFor(31, 20), 5);    // 40-token prompt at 50%
  EXPECT_EQ(PoolKernelFor(31, 24), 5);
  EXPECT_EQ(PoolKernelFor(31, 102), 25);  // 1,024 tokens at 10%
  EXPECT_EQ(PoolKernelFor(31, 410), 31);  // 4,096 tokens at 10%: as asked
  EXPECT_EQ(PoolKernelFor(5, 20), 5);     // kvpress's 5 (its goldens) from 20 kept up
  EXPECT_EQ(PoolKernelFor(5, 3), 1);
  EXPECT_EQ(PoolKernelFor(5, 0), 1);
}

TEST(StreamingLlmPolicyTest, KeepsSinksAndTheMostRecent) {
  LayerFixture f(30, 2, 4);
  f.FillRandom(1);
  SelectionRequest r;
  r.layer = f.layer();
  r.n_keep = 10;
  auto backend = MakeCpuBackend();
  const Selection sel = StreamingLlmPolicy(4).Select(r, *backend);
  const std::vector<int32_t> one = {0, 1, 2, 3, 24, 25, 26, 27, 28, 29};
  std::vector<int32_t> both = one;
  both.insert(both.end(), one.begin(), one.end());
  EXPECT_EQ(sel.slots, both);
  EXPECT_EQ(sel.n_keep, 10);
}

}  // namespace
}  // namespace kvserve
