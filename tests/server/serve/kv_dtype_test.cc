// `kvserve serve --kv-dtype f16`: the same --kv-memory holds about twice the pages (K and V at
// two bytes, log-weights still four), requests generate as usual and report their peak KV
// bytes at the fp16 page size.
#include <chrono>
#include <string>

#include "gtest/gtest.h"
#include "kvserve/v1/generation.grpc.pb.h"
#include "tests/server/serve/server_process.h"

namespace kvserve::testing {
namespace {

TEST(GrpcKvDTypeTest, Fp16PagesDoubleThePoolAndServe) {
  auto f32 = ServerProcess::Start({"--kv-memory", "32M"});
  auto f16 = ServerProcess::Start({"--kv-memory", "32M", "--kv-dtype", "f16"});
  ASSERT_NE(f32, nullptr);
  ASSERT_NE(f16, nullptr);
  const std::optional<double> pages32 = f32->Metric("kvserve_kv_pages_total");
  const std::optional<double> pages16 = f16->Metric("kvserve_kv_pages_total");
  ASSERT_TRUE(pages32 && pages16) << f16->Metrics();
  // random:tiny pages: 4,224 bytes with f32 K/V, 2,176 with f16 (16 slots x 2 heads, so the
  // fp32 log-weights are 128 bytes of each).
  EXPECT_EQ(static_cast<int64_t>(*pages32), (int64_t{32} << 20) / 4224);
  EXPECT_EQ(static_cast<int64_t>(*pages16), (int64_t{32} << 20) / 2176);

  v1::GenerateRequest r;
  r.add_prompts()->set_text("once upon a time there was a cache that kept only half the bytes");
  r.mutable_stopping()->set_max_new_tokens(8);
  r.mutable_stopping()->set_ignore_eos(true);
  v1::GenerateResponse resp;
  const grpc::Status st = CallUnary(*f16, r, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(resp.completions_size(), 1);
  const v1::Completion& c = resp.completions(0);
  EXPECT_EQ(c.token_ids_size(), 8);
  EXPECT_GT(c.usage().peak_kv_bytes(), 0);
  EXPECT_EQ(c.usage().peak_kv_bytes() % 2176, 0) << "peak bytes count fp16 pages";
  EXPECT_EQ(f16->Terminate(std::chrono::seconds(30)), 0);
  EXPECT_EQ(f32->Terminate(std::chrono::seconds(30)), 0);
}

}  // namespace
}  // namespace kvserve::testing
