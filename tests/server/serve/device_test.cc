// `kvserve serve --device`: auto starts on whatever the machine has (the CPU in CI, with a line
// saying why) and serves; the engine's device refusals are tested on the CPU in
// tests/engine/scheduler/scheduler_device_test.cc, and `--device cuda` without a GPU in
// tests/server/cli (it must exit 1 with a message, which ServerProcess does not expect).
#include <chrono>
#include <string>

#include "gtest/gtest.h"
#include "kvserve/v1/generation.grpc.pb.h"
#include "tests/server/serve/server_process.h"

namespace kvserve::testing {
namespace {

TEST(GrpcDeviceTest, DeviceAutoServesOnTheBackendItFound) {
  auto server = ServerProcess::Start({"--device", "auto", "--kv-policy", "snapkv", "--kv-budget", "16"});
  ASSERT_NE(server, nullptr);
  const std::string log = server->Log();
  const bool cpu = log.find("ready on the cpu backend") != std::string::npos;
  const bool cuda = log.find("ready on the cuda backend") != std::string::npos;
  ASSERT_TRUE(cpu || cuda) << log;
  if (cpu) {
    EXPECT_NE(log.find("--device auto:"), std::string::npos) << "the fallback must say why:\n" << log;
  }

  // Three prompts batched together, compressed with the server's snapkv default.
  v1::GenerateRequest r;
  for (const char* text : {"hello", "once upon a time there was a cache", "1, 2, 3, 4, 5, 6, 7, 8, 9, 10"}) {
    r.add_prompts()->set_text(text);
  }
  r.mutable_stopping()->set_max_new_tokens(6);
  r.mutable_stopping()->set_ignore_eos(true);
  v1::GenerateResponse resp;
  const grpc::Status st = CallUnary(*server, r, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_EQ(resp.completions_size(), 3);
  for (const v1::Completion& c : resp.completions()) EXPECT_EQ(c.token_ids_size(), 6);
  EXPECT_EQ(server->Terminate(std::chrono::seconds(30)), 0);
}

}  // namespace
}  // namespace kvserve::testing
