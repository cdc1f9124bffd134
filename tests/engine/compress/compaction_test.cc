// Compaction keeps exactly the selected entries, per head, in order, and the freed pages
// show in the pool's stats.
#include "engine/compress/compaction.h"

#include "tests/engine/compress/layer_fixture.h"

namespace kvserve {
namespace {

TEST(CompactionTest, KeepsExactlyTheSelectedEntriesAndFreesTheTail) {
  const int64_t len = 21, H = 2, d = 3, ps = 4;
  LayerFixture f(len, H, d, ps);
  f.FillRandom(9);
  for (size_t i = 0; i < f.log_w.size(); ++i) f.log_w[i] = static_cast<float>(i) * 0.01f;
  f.Store();
  const int64_t used_before = f.pool.stats().pages_used;
  ASSERT_EQ(f.seq.layer_pages[0].size(), 6u);

  Selection sel;
  sel.n_keep = 5;
  sel.slots = {0, 4, 7, 8, 20, /*head 1*/ 1, 2, 3, 15, 19};
  for (int32_t i = 0; i < 10; ++i) sel.log_w.push_back(-0.5f * static_cast<float>(i));
  ASSERT_TRUE(CompactLayer(*MakeCpuBackend(), f.pool, f.seq, 0, sel).ok());

  EXPECT_EQ(f.seq.layer_len[0], 5);
  EXPECT_EQ(f.seq.layer_pages[0].size(), 2u);
  EXPECT_EQ(f.pool.stats().pages_used, used_before - 4) << "4 of 6 pages go back to the pool";
  EXPECT_TRUE(f.pool.CheckInvariants({&f.seq.layer_pages[0]}).ok());
  const LayerKv L = f.layer();
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t i = 0; i < 5; ++i) {
      const int32_t src = sel.slots[h * 5 + i];
      for (int64_t e = 0; e < d; ++e) {
        EXPECT_EQ(L.Key(i, h)[e], f.k[(src * H + h) * d + e]) << "head " << h << " slot " << i;
        EXPECT_EQ(L.Value(i, h)[e], f.v[(src * H + h) * d + e]);
      }
      EXPECT_EQ(L.LogWeight(i, h), sel.log_w[h * 5 + i]);
    }
  }
}

TEST(CompactionTest, RejectsABadSelectionWithoutChangingAnything) {
  LayerFixture f(10, 1, 2);
  f.FillRandom(2);
  Selection unordered{3, {4, 2, 9}, {0, 0, 0}};
  Selection out_of_range{2, {3, 10}, {0, 0}};
  Selection wrong_size{3, {1, 2}, {0, 0}};
  for (const Selection& s : {unordered, out_of_range, wrong_size}) {
    const absl::Status st = CompactLayer(*MakeCpuBackend(), f.pool, f.seq, 0, s);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_EQ(f.seq.layer_len[0], 10);
  }
  EXPECT_EQ(f.layer().Key(3, 0)[0], f.k[3 * 2]);
}

TEST(CompactionTest, ReservedSequenceKeepsFreedPagesInItsReservationUntilItShrinks) {
  PagePool pool({20, 4, 1, 2});
  SequenceKv seq(1);
  ASSERT_TRUE(seq.Reserve(pool, 10).ok());
  ASSERT_TRUE(seq.GrowLayer(pool, 0, 40).ok());
  seq.layer_len[0] = 40;
  Selection sel{6, {0, 1, 2, 3, 38, 39}, std::vector<float>(6, 0.0f)};
  ASSERT_TRUE(CompactLayer(*MakeCpuBackend(), pool, seq, 0, sel).ok());
  EXPECT_EQ(pool.stats().pages_used, 2);
  EXPECT_EQ(pool.stats().pages_reserved, 10);
  EXPECT_EQ(pool.unpromised_pages(), 10);
  seq.ShrinkReservation(pool, 3);
  EXPECT_EQ(pool.stats().pages_reserved, 3);
  EXPECT_EQ(pool.unpromised_pages(), 17) << "the freed pages serve admission again";
  EXPECT_TRUE(pool.CheckInvariants({&seq.layer_pages[0]}).ok());
  seq.Release(pool);
  EXPECT_EQ(pool.stats().pages_used, 0);
}

}  // namespace
}  // namespace kvserve
