// API keys (--api-key-file): the file's rules, the constant-time check, and a live server that
// refuses every Generation method without a valid bearer token (saying nothing more), counts
// the refusals, keeps grpc.health open, and serves kvctl with --api-key-file or KVSERVE_API_KEY.
#include <cstdio>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "kvserve/v1/generation.grpc.pb.h"
#include "server/serve/api_keys.h"
#include "tests/server/serve/server_process.h"

namespace kvserve {
namespace {

using testing::BinaryPath;
using testing::RunCommand;
using testing::ServerProcess;

constexpr char kKeyA[] = "alpha-0123456789abcdef";
constexpr char kKeyB[] = "bravo-0123456789abcdef";

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

TEST(ApiKeysTest, FileRulesAndBearerCheck) {
  auto keys = ApiKeys::Load(WriteFile("keys_ok", std::string("# ops team\n\n") + kKeyA + "\n  " + kKeyB + "  \n"));
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_TRUE(keys->Allows(std::string("Bearer ") + kKeyA));
  EXPECT_TRUE(keys->Allows(std::string("Bearer ") + kKeyB));
  EXPECT_FALSE(keys->Allows(kKeyA));                                  // no scheme
  EXPECT_FALSE(keys->Allows(std::string("Basic ") + kKeyA));          // another scheme
  EXPECT_FALSE(keys->Allows(std::string("Bearer ") + kKeyA + "x"));   // longer
  EXPECT_FALSE(keys->Allows(std::string("Bearer alpha-0123456789")));  // a prefix
  EXPECT_FALSE(keys->Allows("Bearer "));
  auto short_token = ApiKeys::Load(WriteFile("keys_short", "tooshort\n"));
  ASSERT_FALSE(short_token.ok());
  EXPECT_NE(short_token.status().message().find("line 1: a token needs at least 16 bytes"), std::string::npos);
  EXPECT_EQ(short_token.status().message().find("tooshort"), std::string::npos);  // never echoes a token
  EXPECT_FALSE(ApiKeys::Load(WriteFile("keys_empty", "# nothing\n")).ok());
  EXPECT_EQ(ApiKeys::Load("/nonexistent/keys").status().code(), absl::StatusCode::kNotFound);
}

TEST(GrpcAuthTest, EveryMethodNeedsAValidKeyAndHealthStaysOpen) {
  const std::string key_file = WriteFile("keys_server", std::string(kKeyA) + "\n" + kKeyB + "\n");
  auto server = ServerProcess::Start({"--api-key-file", key_file});
  ASSERT_NE(server, nullptr);  // it became SERVING through grpc.health without a key
  auto stub = v1::Generation::NewStub(server->Channel());
  v1::GenerateRequest req;
  req.add_prompts()->set_text("hello");
  req.mutable_stopping()->set_max_new_tokens(4);
  for (const char* auth : {"", "Bearer wrong-0123456789abcdef", "Bearer alpha-0123456789abcdeF"}) {
    grpc::ClientContext ctx;
    if (*auth) ctx.AddMetadata("authorization", auth);
    v1::GenerateResponse resp;
    const grpc::Status st = stub->Generate(&ctx, req, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << auth;
    EXPECT_EQ(st.error_message(), "missing or invalid API key") << auth;
  }
  {
    grpc::ClientContext ctx;
    v1::TokenizeRequest treq;
    treq.set_text("hi");
    v1::TokenizeResponse tresp;
    EXPECT_EQ(stub->Tokenize(&ctx, treq, &tresp).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext ctx;
    v1::GetModelInfoResponse info;
    EXPECT_EQ(stub->GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", std::string("Bearer ") + kKeyB);
    v1::GenerateResponse resp;
    const grpc::Status st = stub->Generate(&ctx, req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
  }
  EXPECT_EQ(server->Metric("kvserve_auth_failures_total"), 5.0);
  const std::string kvctl = BinaryPath("kvctl");
  EXPECT_EQ(RunCommand(kvctl + " health --addr " + server->address()), "SERVING\n");
  const std::string gen = " generate --addr " + server->address() + " --prompt hello --max-new-tokens 4 --ignore-eos";
  EXPECT_FALSE(RunCommand(kvctl + gen + " --api-key-file " + key_file).empty());
  EXPECT_FALSE(RunCommand("KVSERVE_API_KEY=" + std::string(kKeyA) + " " + kvctl + gen).empty());
  EXPECT_EQ(RunCommand(kvctl + gen + " 2>/dev/null"), "");  // refused: nothing on stdout
}

TEST(GrpcAuthTest, AnUnreadableKeyFileStopsTheServerNamingTheFlag) {
  const std::string out = RunCommand(BinaryPath("kvserve") +
                                     " serve --model random:tiny --port 0 --metrics-port -1 --api-key-file "
                                     "/nonexistent/keys 2>&1");
  EXPECT_NE(out.find("--api-key-file '/nonexistent/keys' cannot be read"), std::string::npos) << out;
}

}  // namespace
}  // namespace kvserve
