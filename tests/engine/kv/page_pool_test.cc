// PagePool reservations and invariants, including a randomized submit/cancel/finish run.
#include "engine/kv/page_pool.h"

#include <random>

#include "engine/kv/kv_memory.h"
#include "gtest/gtest.h"

namespace kvserve {
namespace {

PagePoolShape SmallShape(int64_t pages) { return {pages, 4, 2, 8}; }

TEST(PagePoolTest, ReservationBoundsAllocationAndPlainAllocateSkipsPromisedPages) {
  PagePool pool(SmallShape(10));
  ASSERT_TRUE(pool.Reserve(6).ok());
  EXPECT_EQ(pool.stats().pages_reserved, 6);
  std::vector<int32_t> plain;
  EXPECT_FALSE(pool.Allocate(5, &plain).ok());  // only 4 are unpromised
  EXPECT_TRUE(plain.empty());
  ASSERT_TRUE(pool.Allocate(4, &plain).ok());
  EXPECT_EQ(pool.Reserve(1).code(), absl::StatusCode::kResourceExhausted);
  std::vector<int32_t> reserved;
  ASSERT_TRUE(pool.AllocateReserved(6, &reserved).ok());
  EXPECT_FALSE(pool.AllocateReserved(1, &reserved).ok());
  EXPECT_EQ(pool.stats().pages_used, 10);
  EXPECT_TRUE(pool.CheckInvariants().ok());
  EXPECT_FALSE(pool.Unreserve(1).ok());  // all 6 reserved pages are in use
  pool.FreeReserved(reserved);
  ASSERT_TRUE(pool.Unreserve(6).ok());
  pool.Free(plain);
  const PagePoolStats s = pool.stats();
  EXPECT_EQ(s.pages_used, 0);
  EXPECT_EQ(s.pages_reserved, 0);
  EXPECT_EQ(s.pages_peak, 10);
  EXPECT_EQ(s.bytes_total, 10 * PagePool::PageBytes(SmallShape(10)));
  EXPECT_TRUE(pool.CheckInvariants().ok());
}

TEST(PagePoolTest, InvariantCheckerCatchesSharedAndLeakedPages) {
  PagePool pool(SmallShape(8));
  std::vector<int32_t> a, b;
  ASSERT_TRUE(pool.Allocate(2, &a).ok());
  ASSERT_TRUE(pool.Allocate(2, &b).ok());
  std::vector<const std::vector<int32_t>*> owners = {&a, &b};
  EXPECT_TRUE(pool.CheckInvariants(owners).ok());
  std::vector<int32_t> shared = {a[0]};
  owners.push_back(&shared);
  EXPECT_NE(pool.CheckInvariants(owners).message().find("owned twice"), std::string::npos);
  owners = {&a};
  EXPECT_NE(pool.CheckInvariants(owners).message().find("leaked"), std::string::npos);
}

TEST(PagePoolTest, SequenceGrowsInsideItsReservationOnly) {
  PagePool pool(SmallShape(20));
  SequenceKv seq(2);
  const int64_t peak = PeakPagesForRequest(5, 3, 4, 2);  // 8 slots -> 2 pages per layer
  EXPECT_EQ(peak, 4);
  ASSERT_TRUE(seq.Reserve(pool, peak).ok());
  ASSERT_TRUE(seq.GrowLayer(pool, 0, 8).ok());
  ASSERT_TRUE(seq.GrowLayer(pool, 1, 8).ok());
  EXPECT_EQ(seq.GrowLayer(pool, 1, 9).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(seq.pages_held(), 4);
  seq.Release(pool);
  EXPECT_EQ(pool.stats().pages_used, 0);
  EXPECT_EQ(pool.stats().pages_reserved, 0);
  EXPECT_TRUE(pool.CheckInvariants().ok());
}

// Thousands of random submits (reserve the peak), growth steps, cancels (mid-growth) and
// finishes (fully grown): invariants hold after every op and nothing leaks.
TEST(PagePoolTest, RandomSubmitCancelFinishKeepsInvariants) {
  constexpr int64_t kLayers = 3, kPageSize = 4;
  PagePool pool(SmallShape(200));
  std::mt19937 rng(1234);
  struct Live {
    SequenceKv kv{kLayers};
    int64_t target = 0;  // prompt + max_new
    int64_t len = 0;
  };
  std::vector<Live> live;
  int admitted = 0, rejected = 0;
  for (int op = 0; op < 5000; ++op) {
    const int kind = static_cast<int>(rng() % 4);
    if (kind == 0 || live.empty()) {
      Live s;
      s.target = 1 + static_cast<int64_t>(rng() % 60);
      std::vector<int64_t> quota;
      if (rng() % 3 == 0) {
        for (int l = 0; l < kLayers; ++l) quota.push_back(static_cast<int64_t>(rng() % 80));
      }
      const int64_t peak = PeakPagesForRequest(s.target, 0, kPageSize, kLayers, quota);
      if (!quota.empty()) s.target = std::min(s.target, *std::min_element(quota.begin(), quota.end()));
      if (s.kv.Reserve(pool, peak).ok()) {
        live.push_back(std::move(s));
        ++admitted;
      } else {
        ++rejected;
        EXPECT_GT(peak, pool.unpromised_pages());
      }
    } else {
      const size_t i = rng() % live.size();
      Live& s = live[i];
      if (kind == 1) {  // a step: grow every layer by a chunk
        s.len = std::min(s.target, s.len + 1 + static_cast<int64_t>(rng() % 9));
        for (int64_t l = 0; l < kLayers; ++l) ASSERT_TRUE(s.kv.GrowLayer(pool, l, s.len).ok());
      } else {          // cancel (any time) or finish (grow to the end first)
        if (kind == 3) {
          for (int64_t l = 0; l < kLayers; ++l) ASSERT_TRUE(s.kv.GrowLayer(pool, l, s.target).ok());
        }
        s.kv.Release(pool);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
    std::vector<const std::vector<int32_t>*> owners;
    for (const Live& s : live) {
      for (const auto& pages : s.kv.layer_pages) owners.push_back(&pages);
    }
    const PagePoolStats st = pool.stats();
    ASSERT_LE(st.pages_used, st.pages_total);
    ASSERT_LE(st.pages_reserved, st.pages_total);
    ASSERT_TRUE(pool.CheckInvariants(owners).ok()) << pool.CheckInvariants(owners).message() << " at op " << op;
  }
  for (Live& s : live) s.kv.Release(pool);
  EXPECT_GT(admitted, 500);
  EXPECT_GT(rejected, 0);
  EXPECT_EQ(pool.stats().pages_used, 0);
  EXPECT_EQ(pool.stats().pages_reserved, 0);
  EXPECT_TRUE(pool.CheckInvariants().ok());
}

}  // namespace
}  // namespace kvserve
