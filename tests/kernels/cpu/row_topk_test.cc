// cpu::RowTopK, the oracle of the CUDA top-k kernel, against a full stable sort of each row:
// ties (lower id first), NaN as -inf, -inf, +inf and signed zeros, k from 1 to the vocab.
#include "kernels/cpu/row_topk.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

namespace kvserve {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// The k best of one row by the documented rule, computed another way: a stable sort by
// value keeps equal values in ascending id order.
void BruteForce(const float* row, int64_t vocab, int64_t k, std::vector<int32_t>& ids, std::vector<float>& vals) {
  std::vector<float> v(row, row + vocab);
  for (float& x : v)
    if (std::isnan(x)) x = -kInf;
  std::vector<int32_t> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return v[a] > v[b]; });
  for (int64_t j = 0; j < k; ++j) {
    ids.push_back(order[j]);
    vals.push_back(v[order[j]]);
  }
}

TEST(RowTopK, HandWrittenTiesNanInfAndSignedZeros) {
  const float nan = std::nanf("");
  const std::vector<float> row = {1.0f, nan, 3.0f, 3.0f, -kInf, -0.0f, 0.0f, kInf};
  std::vector<int32_t> ids(8);
  std::vector<float> vals(8);
  cpu::RowTopK(row.data(), 1, 8, 8, ids.data(), vals.data());
  EXPECT_EQ(ids, (std::vector<int32_t>{7, 2, 3, 0, 5, 6, 1, 4}));
  EXPECT_EQ(vals, (std::vector<float>{kInf, 3.0f, 3.0f, 1.0f, 0.0f, 0.0f, -kInf, -kInf}));
  EXPECT_TRUE(std::signbit(vals[4])) << "the value is reported as it is, -0.0";
}

TEST(RowTopK, MatchesAFullStableSortOnRandomRowsWithTies) {
  std::mt19937 rng(5);
  for (int64_t vocab : {1, 7, 300, 5000}) {
    for (int64_t k : {int64_t{1}, int64_t{2}, int64_t{40}, int64_t{257}, vocab}) {
      if (k > vocab) continue;
      const int64_t rows = 3;
      std::vector<float> logits(static_cast<size_t>(rows * vocab));
      std::normal_distribution<float> normal(0.0f, 3.0f);
      std::uniform_int_distribution<int> kind(0, 19);
      for (size_t i = 0; i < logits.size(); ++i) {
        // Row 0 continuous, row 1 on a coarse grid (ties everywhere), row 2 masked and NaN.
        const int64_t r = static_cast<int64_t>(i) / vocab;
        float x = normal(rng);
        if (r == 1) x = std::round(x);
        if (r == 2) {
          const int c = kind(rng);
          x = c < 8 ? -kInf : c < 12 ? std::nanf("") : c == 12 ? -0.0f : c == 13 ? 0.0f : x;
        }
        logits[i] = x;
      }
      std::vector<int32_t> ids(static_cast<size_t>(rows * k));
      std::vector<float> vals(static_cast<size_t>(rows * k));
      cpu::RowTopK(logits.data(), rows, vocab, k, ids.data(), vals.data());
      std::vector<int32_t> want_ids;
      std::vector<float> want_vals;
      for (int64_t r = 0; r < rows; ++r) BruteForce(logits.data() + r * vocab, vocab, k, want_ids, want_vals);
      EXPECT_EQ(ids, want_ids) << "vocab " << vocab << " k " << k;
      EXPECT_EQ(vals, want_vals) << "vocab " << vocab << " k " << k;
    }
  }
}

}  // namespace
}  // namespace kvserve
