// DType block geometry, checked against ggml's.
#include "kernels/dtype.h"

#include <gtest/gtest.h>

namespace kvserve {
namespace {

TEST(DType, BlockGeometryMatchesGgml) {
  // Sizes from the GGML block layouts: a wrong value here corrupts every row offset.
  EXPECT_EQ(RowBytes(DType::kQ4_1, 576), 18 * 20);
  EXPECT_EQ(RowBytes(DType::kQ8_0, 576), 18 * 34);
  EXPECT_EQ(RowBytes(DType::kQ4_K, 4096), 16 * 144);
  EXPECT_EQ(RowBytes(DType::kQ5_K, 4096), 16 * 176);
  EXPECT_EQ(RowBytes(DType::kQ6_K, 4096), 16 * 210);
  EXPECT_EQ(RowBytes(DType::kBF16, 10), 20);
  EXPECT_TRUE(IsSupportedWeightType(14));
  EXPECT_FALSE(IsSupportedWeightType(6));   // Q5_0 is not read
  EXPECT_FALSE(IsSupportedWeightType(999));
}

}  // namespace
}  // namespace kvserve
