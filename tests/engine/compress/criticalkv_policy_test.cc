// CriticalKV: the projected value norms against a dense reference, and the case the method
// exists for: an entry with little attention but a large ||v W_O|| is kept.
#include "engine/compress/criticalkv_policy.h"

#include <cmath>

#include "engine/compress/snapkv_policy.h"
#include "tests/engine/compress/layer_fixture.h"

namespace kvserve {
namespace {

TEST(CriticalKvTest, TheCpuBackendsProjectedValueNormsMatchADenseReference) {
  const int64_t len = 37, kvh = 2, group = 3, d = 8, n_heads = kvh * group, hidden = 20;
  LayerFixture f(len, kvh, d);
  f.FillRandom(3);
  std::mt19937 rng(5);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> wo(static_cast<size_t>(hidden * n_heads * d));
  for (float& x : wo) x = n(rng);
  SelectionRequest r;
  r.layer = f.layer();
  r.n_heads = n_heads;
  r.wo = WeightView{DType::kF32, hidden, n_heads * d, wo.data()};
  auto backend = MakeCpuBackend();
  std::vector<float> got(static_cast<size_t>(kvh * len));
  backend->ProjectedValueNorms(r.layer.kv, r.layer.pages.data(), 0, len, r.wo, n_heads, got.data(), len);
  for (int64_t g = 0; g < kvh; ++g) {
    for (int64_t s = 0; s < len; ++s) {
      double mean = 0;
      for (int64_t h = g * group; h < (g + 1) * group; ++h) {
        double l1 = 0;
        for (int64_t o = 0; o < hidden; ++o) {
          double acc = 0;
          for (int64_t e = 0; e < d; ++e) acc += f.v[(s * kvh + g) * d + e] * static_cast<double>(wo[o * n_heads * d + h * d + e]);
          l1 += std::fabs(acc);
        }
        mean += l1 / group;
      }
      EXPECT_NEAR(got[g * len + s], mean, 1e-4 * mean) << "head " << g << " slot " << s;
    }
  }
}

TEST(CriticalKvTest, KeepsALowAttentionEntryWithALargeProjectedValue) {
  // One KV head, one query head. Keys: slot 3 gets the most attention, slot 9 little (less than
  // slots 12 and 15); all
  // values are small except slot 9's. W_O is the identity (hidden == head_dim).
  const int64_t len = 32, d = 4, w = 4;
  LayerFixture f(len, 1, d);
  std::fill(f.k.begin(), f.k.end(), 0.0f);
  std::fill(f.v.begin(), f.v.end(), 0.01f);
  f.k[3 * d] = 3.0f;
  f.k[9 * d] = 0.5f;
  f.k[12 * d] = 0.8f;  // distractors: more attention than slot 9, small values
  f.k[15 * d] = 0.8f;
  for (int64_t e = 0; e < d; ++e) f.v[9 * d + e] = 50.0f;
  f.Store();
  std::vector<float> q(static_cast<size_t>(w * d), 0.0f);
  for (int64_t i = 0; i < w; ++i) q[i * d] = 2.0f;
  std::vector<float> eye(static_cast<size_t>(d * d), 0.0f);
  for (int64_t e = 0; e < d; ++e) eye[e * d + e] = 1.0f;
  SelectionRequest r;
  r.layer = f.layer();
  r.window = q;
  r.window_len = w;
  r.n_heads = 1;
  r.scale = 1.0f;
  r.wo = WeightView{DType::kF32, d, d, eye.data()};
  r.n_keep = w + 2;  // stage 1 keeps 3: the window first, then stage 2 fills 3 more
  auto backend = MakeCpuBackend();

  const Selection snap = SnapKvPolicy("snapkv", 1).Select(r, *backend);
  EXPECT_EQ(std::count(snap.slots.begin(), snap.slots.end(), 9), 0) << "attention alone drops slot 9";
  EXPECT_EQ(std::count(snap.slots.begin(), snap.slots.end(), 3), 1);

  const Selection crit = CriticalKvPolicy(1, 0.5).Select(r, *backend);
  EXPECT_EQ(std::count(crit.slots.begin(), crit.slots.end(), 9), 1) << "its projected value is large";
  EXPECT_EQ(crit.n_keep, w + 2);
  EXPECT_TRUE(std::is_sorted(crit.slots.begin(), crit.slots.end()));

  // Before the prompt's end in chunk mode, by attention alone: SnapKV's selection, slot 9 out.
  r.mid_prompt = true;
  const Selection mid = CriticalKvPolicy(1, 0.5).Select(r, *backend);
  EXPECT_EQ(mid.slots, snap.slots);
}

}  // namespace
}  // namespace kvserve
