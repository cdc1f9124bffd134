// fp16 K/V storage (--kv-dtype f16): rows round to nearest fp16 and read back exactly, pages
// take half the K/V bytes, generation with a full or compressed cache stays close to fp32
// storage, and a device pool refuses it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "engine/kv/page_pool.h"
#include "kernels/cpu/half.h"
#include "kernels/kv_rows.h"
#include "tests/engine/compress/tiny_generation_fixture.h"
#include "tests/kernels/host_as_device_backend.h"

namespace kvserve {
namespace {

TEST(KvRowsTest, Fp16RowsRoundToNearestAndReadBackWidened) {
  PagePool pool({2, 4, 2, 8, DType::kF16});
  const PagedKv kv = pool.view();
  const std::vector<float> row = {1.0f, 1.0f / 3, -2.5e-5f, 65504.0f, 1e5f, -0.0f, 3.14159f, 1e-9f};
  WriteKvRow(kv, kv.v, 5, row.data());
  std::vector<float> back(8);
  ReadKvRow(kv, kv.v, 5, back.data());
  for (size_t i = 0; i < row.size(); ++i) EXPECT_EQ(back[i], Fp16ToFp32(Fp32ToFp16(row[i]))) << i;
  EXPECT_EQ(back[3], 65504.0f);                  // the largest fp16 is exact
  EXPECT_TRUE(std::isinf(back[4]));              // beyond it: infinity, as a cast would give
  EXPECT_NEAR(back[1], 1.0f / 3, 1.0f / 3 / 1024);  // 11 significant bits
  // Overlapping copies move rows like memmove: rows 5, 6 -> 6, 7.
  WriteKvRow(kv, kv.v, 6, std::vector<float>(8, 2.0f).data());
  CopyKvRows(kv, kv.v, 6, 5, 2);
  ReadKvRow(kv, kv.v, 6, back.data());
  EXPECT_EQ(back[6], Fp16ToFp32(Fp32ToFp16(3.14159f)));
  ReadKvRow(kv, kv.v, 7, back.data());
  EXPECT_EQ(back[0], 2.0f);
}

TEST(KvRowsTest, VectorAndScalarConversionsRoundAlike) {
  // head_dim 11: eight elements go through F16C, three through the scalar code of half.h.
  PagePool pool({4, 4, 1, 11, DType::kF16});
  const PagedKv kv = pool.view();
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> exponent(-30.0f, 17.0f), sign(-1.0f, 1.0f);
  std::vector<float> row(11), back(11);
  for (int trial = 0; trial < 2000; ++trial) {
    for (float& x : row) x = std::copysign(std::exp2(exponent(rng)), sign(rng));  // subnormal to overflow
    WriteKvRow(kv, kv.k, trial % 16, row.data());
    ReadKvRow(kv, kv.k, trial % 16, back.data());
    for (size_t i = 0; i < row.size(); ++i) {
      ASSERT_EQ(back[i], Fp16ToFp32(Fp32ToFp16(row[i]))) << "x " << row[i] << " at " << i;
    }
  }
}

TEST(KvRowsTest, Fp16PagesTakeHalfTheKeyValueBytes) {
  const PagePoolShape f32{100, 16, 8, 128}, f16{100, 16, 8, 128, DType::kF16};
  // Per page: 16 slots x 8 heads x (K + V) x 128, plus an fp32 log-weight per slot and head.
  EXPECT_EQ(PagePool::PageBytes(f32), 16 * 8 * (2 * 128 * 4 + 4));
  EXPECT_EQ(PagePool::PageBytes(f16), 16 * 8 * (2 * 128 * 2 + 4));
  PagePool pool(f16);
  EXPECT_EQ(pool.stats().bytes_total, 100 * PagePool::PageBytes(f16));
}

TEST(KvRowsTest, DevicePoolsRefuseFp16) {
  HostAsDeviceBackend device;
  auto cpu = MakeCpuBackend();
  EXPECT_TRUE(CheckKvDType(DType::kF16, *cpu).ok());
  EXPECT_TRUE(CheckKvDType(DType::kF32, device).ok());
  const absl::Status st = CheckKvDType(DType::kF16, device);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("--kv-dtype f16 runs on the CPU backend only"), std::string::npos) << st;
  EXPECT_EQ(CheckKvDType(DType::kQ8_0, *cpu).code(), absl::StatusCode::kInvalidArgument);
}

// Without --kv-dtype a pool gets f16 in host memory and f32 on a device, whose kernels read
// only f32 pages: the default must pass CheckKvDType on every backend (--device cuda must not
// fail by default).
TEST(KvRowsTest, DefaultIsFp16OnTheHostAndFp32OnADevice) {
  HostAsDeviceBackend device;
  auto cpu = MakeCpuBackend();
  EXPECT_EQ(DefaultKvDType(*cpu), DType::kF16);
  EXPECT_EQ(DefaultKvDType(device), DType::kF32);
  EXPECT_TRUE(CheckKvDType(DefaultKvDType(*cpu), *cpu).ok());
  EXPECT_TRUE(CheckKvDType(DefaultKvDType(device), device).ok());
}

class KvDTypeGenerationTest : public TinyGenerationTest {};

// Largest |a - b| over two greedy runs' logits, relative to the largest |logit|, up to the
// first step where their tokens differ (after it they continue different texts). At that
// step, a's token must have been a near-tie for b: within `tie` of b's best logit.
double RelativeLogitGap(const GenerationResult& a, const GenerationResult& b, float tie) {
  double gap = 0, scale = 1e-6;
  for (size_t i = 0; i < std::min(a.step_logits.size(), b.step_logits.size()); ++i) {
    for (size_t j = 0; j < a.step_logits[i].size(); ++j) {
      gap = std::max(gap, static_cast<double>(std::fabs(a.step_logits[i][j] - b.step_logits[i][j])));
      scale = std::max(scale, static_cast<double>(std::fabs(a.step_logits[i][j])));
    }
    if (a.tokens[i] != b.tokens[i]) {
      const std::vector<float>& l = b.step_logits[i];
      EXPECT_GE(l[a.tokens[i]], *std::max_element(l.begin(), l.end()) - tie) << "step " << i << " is no near-tie";
      break;
    }
  }
  return gap / scale;
}

TEST_F(KvDTypeGenerationTest, Fp16StorageStaysCloseToFp32ForEveryPolicy) {
  const auto prompt = Prompt(300);
  for (const char* policy : {"full", "snapkv", "criticalkv", "streaming", "pyramid", "mergereduce:random",
                             "mergereduce:cluster"}) {
    CompressionSettings kv;
    kv.policy = policy;
    kv.budget = 0.3;
    const GenerationResult f32 = Run(prompt, kv, 16, 64);
    const GenerationResult f16 = Run(prompt, kv, 16, 64, 16, DType::kF16);
    ASSERT_EQ(f16.step_logits.size(), f32.step_logits.size()) << policy;
    // fp16 keeps 11 significant bits of each K/V element; the logits move far less than 1%
    // (the tiny model's largest is ~5; they move by ~0.002), and a token changes only where
    // fp32's top two were within 0.01.
    EXPECT_LT(RelativeLogitGap(f16, f32, 0.01f), 0.01) << policy;
    // The same entries are kept (or nearly): memory per kept entry halves, the count does not.
    EXPECT_NEAR(static_cast<double>(f16.kv_slots_at_end), static_cast<double>(f32.kv_slots_at_end),
                0.02 * static_cast<double>(f32.kv_slots_at_end)) << policy;
    EXPECT_LT(f16.peak_kv_bytes, f32.peak_kv_bytes * 6 / 10) << policy;
  }
}

}  // namespace
}  // namespace kvserve
