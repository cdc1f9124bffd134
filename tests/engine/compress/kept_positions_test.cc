// KeptPositions follows each head's kept prompt positions through selections: the first
// selection keeps slots as positions, a later one maps its old slots through the previous
// selection and its new slots to the positions that arrived since.
#include "engine/compress/kept_positions.h"

#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace kvserve {
namespace {

TEST(KeptPositionsTest, FollowsEachHeadThroughTwoSelections) {
  KeptPositions kept(/*n_layers=*/2);
  // Before any selection every position is held.
  EXPECT_TRUE(kept.Holds(0, 0, 5));
  // Layer 0, two heads: 10 slots (positions 0..9), keep 4 per head.
  kept.OnSelection(0, 2, 10, std::vector<int32_t>{0, 3, 5, 9, 1, 2, 8, 9}, 4);
  EXPECT_TRUE(kept.Holds(0, 0, 3));
  EXPECT_FALSE(kept.Holds(0, 0, 4));
  EXPECT_TRUE(kept.Holds(0, 1, 8));
  EXPECT_FALSE(kept.Holds(0, 1, 0));
  EXPECT_TRUE(kept.Holds(0, 1, 12));  // not seen yet: arrives after the selection
  // Six more positions (10..15) arrive: 4 kept + 6 new slots; keep 3 per head.
  kept.OnSelection(0, 2, 10, std::vector<int32_t>{1, 4, 9, 0, 5, 6}, 3);
  for (int p : {3, 10, 15}) EXPECT_TRUE(kept.Holds(0, 0, p)) << p;
  for (int p : {0, 5, 9, 11, 14}) EXPECT_FALSE(kept.Holds(0, 0, p)) << p;
  for (int p : {1, 11, 12}) EXPECT_TRUE(kept.Holds(0, 1, p)) << p;
  for (int p : {2, 8, 9, 10, 15}) EXPECT_FALSE(kept.Holds(0, 1, p)) << p;
  // Layer 1 never selected, so both its heads hold everything; of layer 0, head 1 holds 11
  // and 12, head 0 neither.
  const std::vector<std::pair<int64_t, int64_t>> span{{11, 13}};
  EXPECT_DOUBLE_EQ(kept.ShareHoldingSpans(2, span), 0.75);
  const std::vector<std::pair<int64_t, int64_t>> two{{3, 4}, {10, 11}};
  EXPECT_DOUBLE_EQ(kept.ShareHoldingSpans(2, two), 0.75);  // head 0 of layer 0 holds 3 and 10
  const std::vector<std::pair<int64_t, int64_t>> none{{4, 6}};
  EXPECT_DOUBLE_EQ(kept.ShareHoldingSpans(2, none), 0.5);  // only layer 1
}

}  // namespace
}  // namespace kvserve
