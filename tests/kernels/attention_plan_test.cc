// The host-side work split of the CUDA attention kernels: every decode token's keys are
// covered exactly once by its splits, prefill tiles cover every query row once, and the
// visible lengths follow AttentionBatch's causal rule.
#include "kernels/attention_plan.h"

#include <gtest/gtest.h>

#include <vector>

namespace kvserve {
namespace {

TEST(AttentionPlan, SplitsCoverEachDecodeTokenAndTilesCoverPrefill) {
  // Sequences: decode with 5000 cached, a 40-token chunk after 100, decode with 1 slot.
  std::vector<int32_t> q_indptr = {0, 1, 41, 42}, page_indptr = {0, 313, 322, 323}, kv_len = {5001, 140, 1};
  std::vector<int32_t> pages(323);
  const AttentionBatch b{3, q_indptr.data(), page_indptr.data(), pages.data(), kv_len.data()};
  AttentionPlanOptions o;
  o.tile_tokens = 16;
  o.target_splits = 8;
  const AttentionPlan p = PlanAttention(b, o);

  ASSERT_EQ(p.token_visible.size(), 42u);
  EXPECT_EQ(p.token_visible[0], 5001);
  EXPECT_EQ(p.token_visible[1], 101);   // first token of the chunk sees the prefix and itself
  EXPECT_EQ(p.token_visible[40], 140);
  EXPECT_EQ(p.token_visible[41], 1);
  EXPECT_EQ(p.token_seq[20], 1);
  EXPECT_EQ(p.split_len % o.split_align, 0);
  EXPECT_GE(p.split_len, o.min_split);

  ASSERT_EQ(p.merges.size(), 2u);  // the two decode tokens
  for (const DecodeMerge& m : p.merges) {
    int32_t next = 0;
    for (int32_t s = m.split_begin; s < m.split_end; ++s) {
      EXPECT_EQ(p.splits[s].token, m.token);
      EXPECT_EQ(p.splits[s].kv_begin, next);
      EXPECT_LE(p.splits[s].kv_end - p.splits[s].kv_begin, p.split_len);
      next = p.splits[s].kv_end;
    }
    EXPECT_EQ(next, p.token_visible[m.token]);
  }
  EXPECT_GE(p.merges[0].split_end - p.merges[0].split_begin, 2);  // 5001 keys are split

  ASSERT_EQ(p.tiles.size(), 3u);  // 40 tokens in tiles of 16
  int32_t covered = 0;
  for (const PrefillTile& t : p.tiles) {
    EXPECT_EQ(t.seq, 1);
    EXPECT_EQ(t.token_begin, 1 + covered);
    EXPECT_EQ(t.kv_end, p.token_visible[t.token_begin + t.n_tokens - 1]);
    covered += t.n_tokens;
  }
  EXPECT_EQ(covered, 40);
}

// A GQA group wider than the kernel's 64 tile rows gives tile_tokens 0: the plan still makes
// tiles of one token (it used to loop forever).
TEST(AttentionPlan, ZeroTileTokensStillCoversThePrefill) {
  std::vector<int32_t> q_indptr = {0, 12}, page_indptr = {0, 1}, kv_len = {12};
  std::vector<int32_t> pages(1);
  const AttentionBatch b{1, q_indptr.data(), page_indptr.data(), pages.data(), kv_len.data()};
  AttentionPlanOptions o;
  o.tile_tokens = 0;
  const AttentionPlan p = PlanAttention(b, o);
  ASSERT_EQ(p.tiles.size(), 12u);
  for (size_t i = 0; i < p.tiles.size(); ++i) {
    EXPECT_EQ(p.tiles[i].token_begin, static_cast<int32_t>(i));
    EXPECT_EQ(p.tiles[i].n_tokens, 1);
  }
}

}  // namespace
}  // namespace kvserve
