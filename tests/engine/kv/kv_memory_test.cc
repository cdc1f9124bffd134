// --kv-memory parsing, page counts for a byte budget, and peak pages for admission.
#include "engine/kv/kv_memory.h"

#include "gtest/gtest.h"
#include "tests/kernels/host_as_device_backend.h"

namespace kvserve {
namespace {

TEST(KvMemoryTest, ParsesBytesUnitsAndFractions) {
  EXPECT_EQ(*ParseKvMemory("512M", 0), 512LL << 20);
  EXPECT_EQ(*ParseKvMemory("2G", 0), 2LL << 30);
  EXPECT_EQ(*ParseKvMemory("2GiB", 0), 2LL << 30);
  EXPECT_EQ(*ParseKvMemory("1.5k", 0), 1536);
  EXPECT_EQ(*ParseKvMemory("4096", 0), 4096);
  EXPECT_EQ(*ParseKvMemory("0.5", 1000), 500);
  EXPECT_EQ(*ParseKvMemory("1.0", 1000), 1000);
}

TEST(KvMemoryTest, RejectsBadSpecsNamingThem) {
  for (const char* spec : {"", "lots", "-1G", "0", "3X", "0.5"}) {
    absl::StatusOr<int64_t> r = ParseKvMemory(spec, 0);
    ASSERT_FALSE(r.ok()) << spec;
    EXPECT_NE(r.status().message().find(std::string("'") + spec + "'"), std::string::npos) << r.status();
  }
}

TEST(KvMemoryTest, AvailableMemoryIsPositive) {
  absl::StatusOr<int64_t> avail = AvailableMemoryBytes();
  ASSERT_TRUE(avail.ok()) << avail.status();
  EXPECT_GT(*avail, 0);
}

TEST(KvMemoryTest, OnADeviceAFractionIsOfFreeDeviceMemoryAndMoreThanFreeIsRefused) {
  HostAsDeviceBackend device;
  device.free_bytes = 4 << 20;
  EXPECT_EQ(*KvMemoryBytes("0.5", device), 2 << 20);
  EXPECT_EQ(*KvMemoryBytes("3M", device), 3 << 20);
  const absl::StatusOr<int64_t> big = KvMemoryBytes("8M", device);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(big.status().message().find("4194304 bytes free on the host-as-device device"), std::string::npos)
      << big.status();
  // On the host a fraction is of MemAvailable (read twice here, so it may move a little).
  auto cpu = MakeCpuBackend();
  const double host = static_cast<double>(*KvMemoryBytes("0.5", *cpu));
  EXPECT_NEAR(host, 0.5 * static_cast<double>(*AvailableMemoryBytes()), 0.05 * host);
}

TEST(KvMemoryTest, PagesForBytes) {
  const PagePoolShape shape{0, 16, 3, 64};
  const int64_t page = PagePool::PageBytes(shape);
  EXPECT_EQ(page, 4 * 16 * 3 * 129);
  EXPECT_EQ(*PagesForBytes(10 * page + 1, shape), 10);
  EXPECT_NE(PagesForBytes(page - 1, shape).status().message().find("holds no KV page"), std::string::npos);
}

TEST(KvMemoryTest, PeakPagesCountsEveryLayerAndHonoursQuotas) {
  EXPECT_EQ(PeakPagesForRequest(16, 0, 16, 30), 30);
  EXPECT_EQ(PeakPagesForRequest(16, 1, 16, 30), 60);
  EXPECT_EQ(PeakPagesForRequest(10, 10, 8, 2), 6);
  const std::vector<int64_t> quota = {8, 100};
  EXPECT_EQ(PeakPagesForRequest(10, 10, 8, 2, quota), 1 + 3);
}

}  // namespace
}  // namespace kvserve
