// Weighted KV entries in paged attention: an entry with log-weight log(c) counts as c copies
// of itself, and a log-weight of -inf (merge-reduce padding) removes the entry without NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "tests/kernels/cpu/random_blocks.h"

namespace kvserve::cpu {
namespace {

constexpr int64_t kPage = 3, kHeads = 4, kKv = 2, kDim = 8;
constexpr float kInf = std::numeric_limits<float>::infinity();

// One decode query over entries k, v [n, kKv, kDim] with log-weights lw [n, kKv], stored in
// pages in reverse order; returns out [kHeads, kDim]. Log-weights are written as given (no
// WriteKv), so the caller controls every entry, the newest included.
std::vector<float> Attend(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                          const std::vector<float>& lw) {
  const int64_t n = static_cast<int64_t>(lw.size()) / kKv, pages = (n + kPage - 1) / kPage;
  std::vector<float> kp(pages * kPage * kKv * kDim), vp(kp.size()), lp(pages * kPage * kKv);
  std::vector<int32_t> page_indices;
  for (int64_t p = 0; p < pages; ++p) page_indices.push_back(static_cast<int32_t>(pages - 1 - p));
  for (int64_t j = 0; j < n; ++j) {
    const int64_t slot = page_indices[j / kPage] * kPage + j % kPage;
    std::copy_n(&k[j * kKv * kDim], kKv * kDim, &kp[slot * kKv * kDim]);
    std::copy_n(&v[j * kKv * kDim], kKv * kDim, &vp[slot * kKv * kDim]);
    std::copy_n(&lw[j * kKv], kKv, &lp[slot * kKv]);
  }
  const PagedKv kv{kp.data(), vp.data(), lp.data(), kPage, kKv, kDim};
  const int32_t q_indptr[] = {0, 1}, page_indptr[] = {0, static_cast<int32_t>(pages)};
  const int32_t kv_len[] = {static_cast<int32_t>(n)};
  const AttentionBatch batch{1, q_indptr, page_indptr, page_indices.data(), kv_len};
  std::vector<float> out(kHeads * kDim);
  PagedAttention(kv, batch, {kHeads, 1.0f / std::sqrt(static_cast<float>(kDim))}, q.data(), out.data());
  return out;
}

// Entry j of (k, v, lw) appended to the copies.
void Append(const std::vector<float>& k, const std::vector<float>& v, const std::vector<float>& lw, int64_t j,
            std::vector<float>* k2, std::vector<float>* v2, std::vector<float>* lw2) {
  k2->insert(k2->end(), k.begin() + j * kKv * kDim, k.begin() + (j + 1) * kKv * kDim);
  v2->insert(v2->end(), v.begin() + j * kKv * kDim, v.begin() + (j + 1) * kKv * kDim);
  lw2->insert(lw2->end(), lw.begin() + j * kKv, lw.begin() + (j + 1) * kKv);
}

struct Entries {
  std::vector<float> q = kvserve::testing::RandomFloats(kHeads * kDim, 1, 2.0f);
  std::vector<float> k = kvserve::testing::RandomFloats(7 * kKv * kDim, 2, 2.0f);
  std::vector<float> v = kvserve::testing::RandomFloats(7 * kKv * kDim, 3);
  std::vector<float> lw = kvserve::testing::RandomFloats(7 * kKv, 4, 0.5f);
};

TEST(WeightedAttentionTest, DuplicatingAnEntryEqualsDoublingItsWeight) {
  const Entries e;
  for (int64_t dup = 0; dup < 7; ++dup) {
    std::vector<float> k2, v2, lw2;
    for (int64_t j = 0; j < 7; ++j) {
      Append(e.k, e.v, e.lw, j, &k2, &v2, &lw2);
      if (j == dup) Append(e.k, e.v, e.lw, j, &k2, &v2, &lw2);
    }
    std::vector<float> doubled = e.lw;
    for (int64_t h = 0; h < kKv; ++h) doubled[dup * kKv + h] += std::log(2.0f);
    const std::vector<float> want = Attend(e.q, k2, v2, lw2), got = Attend(e.q, e.k, e.v, doubled);
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5f) << "duplicate " << dup << " at " << i;
  }
}

TEST(WeightedAttentionTest, MinusInfinityLogWeightRemovesTheEntry) {
  const Entries e;
  std::vector<float> k2, v2, lw2, padded = e.lw;
  for (int64_t j = 0; j < 7; ++j) {
    if (j == 1 || j == 4) {
      for (int64_t h = 0; h < kKv; ++h) padded[j * kKv + h] = -kInf;
    } else {
      Append(e.k, e.v, e.lw, j, &k2, &v2, &lw2);
    }
  }
  const std::vector<float> want = Attend(e.q, k2, v2, lw2), got = Attend(e.q, e.k, e.v, padded);
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_FALSE(std::isnan(got[i])) << i;
    ASSERT_NEAR(got[i], want[i], 1e-5f) << i;
  }
}

TEST(WeightedAttentionTest, AllMinusInfinityGivesZerosNotNan) {
  const Entries e;
  const std::vector<float> none(e.lw.size(), -kInf);
  for (float x : Attend(e.q, e.k, e.v, none)) EXPECT_EQ(x, 0.0f);
}

TEST(WeightedAttentionTest, LongDecodeWithAWeightlessFirstHalfEqualsTheSecondHalfAlone) {
  // 1,200 entries split into ranges for the threads; the ranges of the first half have no
  // weighted entry at all and must drop out of the merge without NaN.
  const int64_t n = 1200;
  const auto q = kvserve::testing::RandomFloats(kHeads * kDim, 11, 2.0f);
  const auto k = kvserve::testing::RandomFloats(n * kKv * kDim, 12, 2.0f);
  const auto v = kvserve::testing::RandomFloats(n * kKv * kDim, 13);
  auto lw = kvserve::testing::RandomFloats(n * kKv, 14, 0.5f);
  std::fill(lw.begin(), lw.begin() + n / 2 * kKv, -kInf);
  std::vector<float> k2, v2, lw2;
  for (int64_t j = n / 2; j < n; ++j) Append(k, v, lw, j, &k2, &v2, &lw2);
  const std::vector<float> got = Attend(q, k, v, lw), want = Attend(q, k2, v2, lw2);
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << i;
    ASSERT_NEAR(got[i], want[i], 1e-5f) << i;
  }
}

}  // namespace
}  // namespace kvserve::cpu
