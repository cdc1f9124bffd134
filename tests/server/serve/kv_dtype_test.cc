// K/V storage of `kvserve serve`: f16 by default on the CPU, so the same --kv-memory holds about
// twice the pages of `--kv-dtype f32` (K and V at two bytes, log-weights still four); requests
// generate as usual and report their peak KV bytes at the fp16 page size. Without --kv-dtype a
// device backend gets f32, the only storage its kernels read.
#include <chrono>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "kvserve/v1/generation.grpc.pb.h"
#include "server/serve/kv_flags.h"
#include "tests/kernels/host_as_device_backend.h"
#include "tests/server/serve/server_process.h"

namespace kvserve::testing {
namespace {

// random:tiny's page: 16 slots x 2 KV heads x (K and V of head_dim 16 at `kv_bytes` each, plus
// an fp32 log-weight): 4,224 bytes with f32 K/V, 2,176 with f16.
constexpr int64_t TinyPageBytes(int64_t kv_bytes) { return 16 * 2 * (2 * 16 * kv_bytes + 4); }

TEST(GrpcKvDTypeTest, Fp16IsTheDefaultAndHalvesThePagesOfF32) {
  auto by_default = ServerProcess::Start({"--kv-memory", "32M"});
  auto f32 = ServerProcess::Start({"--kv-memory", "32M", "--kv-dtype", "f32"});
  ASSERT_NE(by_default, nullptr);
  ASSERT_NE(f32, nullptr);
  const std::optional<double> pages16 = by_default->Metric("kvserve_kv_pages_total");
  const std::optional<double> pages32 = f32->Metric("kvserve_kv_pages_total");
  ASSERT_TRUE(pages32 && pages16) << by_default->Metrics();
  EXPECT_EQ(static_cast<int64_t>(*pages16), (int64_t{32} << 20) / TinyPageBytes(2));
  EXPECT_EQ(static_cast<int64_t>(*pages32), (int64_t{32} << 20) / TinyPageBytes(4));

  v1::GenerateRequest r;
  r.add_prompts()->set_text("once upon a time there was a cache that kept only half the bytes");
  r.mutable_stopping()->set_max_new_tokens(8);
  r.mutable_stopping()->set_ignore_eos(true);
  for (ServerProcess* server : {by_default.get(), f32.get()}) {
    v1::GenerateResponse resp;
    const grpc::Status st = CallUnary(*server, r, &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
    ASSERT_EQ(resp.completions_size(), 1);
    const v1::Completion& c = resp.completions(0);
    EXPECT_EQ(c.token_ids_size(), 8);
    EXPECT_GT(c.usage().peak_kv_bytes(), 0);
    const int64_t page_bytes = TinyPageBytes(server == f32.get() ? 4 : 2);
    EXPECT_EQ(c.usage().peak_kv_bytes() % page_bytes, 0) << "peak bytes count pages of " << page_bytes << " bytes";
  }
  EXPECT_EQ(by_default->Terminate(std::chrono::seconds(30)), 0);
  EXPECT_EQ(f32->Terminate(std::chrono::seconds(30)), 0);
}

absl::StatusOr<DType> KvDTypeOf(std::vector<std::string> flags, const Backend& backend) {
  std::vector<char*> argv = {const_cast<char*>("serve")};
  for (std::string& f : flags) argv.push_back(f.data());
  absl::StatusOr<CliArgs> args = CliArgs::Parse(static_cast<int>(argv.size()), argv.data(), {"kv-dtype"}, {});
  if (!args.ok()) return args.status();
  return KvDTypeFromArgs(*args, backend);
}

// The default resolves per backend (f16 on the CPU, f32 on a device), and an explicit
// --kv-dtype is taken as given, the CUDA refusal of f16 left to CheckKvDType.
TEST(KvDTypeFlagTest, DefaultDependsOnTheBackendAndTheFlagOverridesIt) {
  auto cpu = MakeCpuBackend();
  HostAsDeviceBackend device;
  EXPECT_EQ(KvDTypeOf({}, *cpu).value(), DType::kF16);
  EXPECT_EQ(KvDTypeOf({}, device).value(), DType::kF32);
  EXPECT_EQ(KvDTypeOf({"--kv-dtype", "f32"}, *cpu).value(), DType::kF32);
  EXPECT_EQ(KvDTypeOf({"--kv-dtype", "f16"}, device).value(), DType::kF16);
  const absl::StatusOr<DType> bad = KvDTypeOf({"--kv-dtype", "bf16"}, *cpu);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'bf16'"), std::string::npos) << bad.status();
  EXPECT_EQ(KvDTypeFlagName(DType::kF16), "f16");
  EXPECT_EQ(KvDTypeFlagName(DType::kF32), "f32");
}

}  // namespace
}  // namespace kvserve::testing
