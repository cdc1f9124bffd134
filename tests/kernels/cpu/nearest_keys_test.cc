// cpu::NearestKeys (each evicted key's nearest kept key, --evicted-weight merge) in every ISA
// this CPU runs, against the plain loop (NearestKeysPlain) that sums the same products in the
// same order: equal answers on random keys, on keys with exact ties, NaN and infinities, for
// counts of keys and rows around the panel width and the row tiles, and across panel chunks.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/nearest_keys.h"
#include "tests/kernels/cpu/cpu_isas.h"

namespace kvserve {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

struct Packed {
  std::vector<float> panels, sq;
};

Packed Pack(const std::vector<float>& keys, int64_t k, int64_t d) {
  Packed p;
  p.panels.resize(static_cast<size_t>(cpu::NearestPanelFloats(k, d)));
  p.sq.resize(p.panels.size() / static_cast<size_t>(d));
  cpu::PackNearestPanels(keys.data(), k, d, p.panels.data(), p.sq.data());
  return p;
}

// The nearest key by the definition, in double: what the float forms approximate.
int64_t NearestInDouble(const float* a, const std::vector<float>& keys, int64_t k, int64_t d) {
  int64_t to = 0;
  double best = INFINITY;
  for (int64_t j = 0; j < k; ++j) {
    double dist = 0;
    for (int64_t e = 0; e < d; ++e) dist += (static_cast<double>(a[e]) - keys[j * d + e]) * (a[e] - keys[j * d + e]);
    if (dist < best) {
      best = dist;
      to = j;
    }
  }
  return to;
}

// Random keys; few_values draws from {-1, 0, 1, 2}, so distances tie exactly and often.
std::vector<float> RandomKeys(int64_t n, int64_t d, bool few_values, std::mt19937& rng) {
  std::normal_distribution<float> wide(0.0f, 1.0f);
  std::uniform_int_distribution<int> few(-1, 2);
  std::vector<float> x(static_cast<size_t>(n * d));
  for (float& v : x) v = few_values ? static_cast<float>(few(rng)) : wide(rng);
  return x;
}

TEST(NearestKeysTest, EveryIsaAnswersAsThePlainLoop) {
  std::mt19937 rng(11);
  int64_t tied_rows = 0;
  for (const cpu::CpuIsa isa : testing::IsasThisCpuRuns()) {
    cpu::ScopedCpuIsa use(isa);
    for (const int64_t d : {1, 3, 16, 64}) {
      for (const int64_t k : {1, 2, 31, 32, 33, 70, 100}) {
        for (const int64_t m : {1, 2, 3, 7, 8, 9, 17}) {
          for (const bool few : {false, true}) {
            const std::vector<float> keys = RandomKeys(k, d, few, rng), a = RandomKeys(m, d, few, rng);
            const Packed p = Pack(keys, k, d);
            std::vector<int64_t> got(static_cast<size_t>(m)), want(static_cast<size_t>(m));
            cpu::NearestKeys(a.data(), m, d, p.panels.data(), p.sq.data(), k, got.data());
            cpu::NearestKeysPlain(a.data(), m, d, p.panels.data(), p.sq.data(), k, want.data());
            ASSERT_EQ(got, want) << testing::IsaTrace(isa) << " d " << d << " k " << k << " m " << m << " few " << few;
            if (few && k > 32) tied_rows += m;
            if (!few && d >= 16) {
              for (int64_t r = 0; r < m; ++r) {
                EXPECT_EQ(want[r], NearestInDouble(&a[r * d], keys, k, d)) << "random keys are not near-tied";
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(tied_rows, 500);
}

TEST(NearestKeysTest, ManyPanelChunksAndRowTiles) {
  // 2,100 keys of 64: 66 panels, three 256 KB chunks; 45 rows: five tiles of eight and a tail.
  std::mt19937 rng(12);
  const int64_t k = 2100, d = 64, m = 45;
  const std::vector<float> keys = RandomKeys(k, d, false, rng), a = RandomKeys(m, d, false, rng);
  const Packed p = Pack(keys, k, d);
  std::vector<int64_t> want(static_cast<size_t>(m));
  cpu::NearestKeysPlain(a.data(), m, d, p.panels.data(), p.sq.data(), k, want.data());
  for (const cpu::CpuIsa isa : testing::IsasThisCpuRuns()) {
    cpu::ScopedCpuIsa use(isa);
    std::vector<int64_t> got(static_cast<size_t>(m));
    cpu::NearestKeys(a.data(), m, d, p.panels.data(), p.sq.data(), k, got.data());
    EXPECT_EQ(got, want) << testing::IsaTrace(isa);
  }
  for (int64_t r = 0; r < m; ++r) EXPECT_EQ(want[r], NearestInDouble(&a[r * d], keys, k, d)) << "row " << r;
}

TEST(NearestKeysTest, TiesGoToTheFirstKeyAndNaNOrInfinityNeverWins) {
  const int64_t d = 2;
  // 40 keys: all at (5, 0) but key 37 at (1, 0) and key 36 also at (1, 0) (the first of the two
  // wins); key 3 NaN, key 4 infinite.
  std::vector<float> keys(40 * d);
  for (int64_t j = 0; j < 40; ++j) keys[j * d] = 5;
  keys[36 * d] = keys[37 * d] = 1;
  keys[3 * d] = std::numeric_limits<float>::quiet_NaN();
  keys[4 * d] = kInf;
  const Packed p = Pack(keys, 40, d);
  const std::vector<float> a = {1, 0, 6, 0};
  for (const cpu::CpuIsa isa : testing::IsasThisCpuRuns()) {
    cpu::ScopedCpuIsa use(isa);
    std::vector<int64_t> got(2);
    cpu::NearestKeys(a.data(), 2, d, p.panels.data(), p.sq.data(), 40, got.data());
    EXPECT_EQ(got[0], 36) << testing::IsaTrace(isa);
    EXPECT_EQ(got[1], 0) << testing::IsaTrace(isa) << ": keys 0-2 tie at (5, 0), key 0 is first";
  }
  // A row of NaN is nearest to nothing: the answer is key 0.
  const std::vector<float> nan_row = {std::numeric_limits<float>::quiet_NaN(), 0};
  for (const cpu::CpuIsa isa : testing::IsasThisCpuRuns()) {
    cpu::ScopedCpuIsa use(isa);
    int64_t got = -1;
    cpu::NearestKeys(nan_row.data(), 1, d, p.panels.data(), p.sq.data(), 40, &got);
    EXPECT_EQ(got, 0) << testing::IsaTrace(isa);
  }
}

}  // namespace
}  // namespace kvserve
