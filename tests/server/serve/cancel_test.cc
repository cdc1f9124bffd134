// Cancellation: a client cancel mid-stream and an expired deadline abort the request at
// once, and its KV pages go back to the pool (seen through the /metrics gauges).
#include <thread>

#include "gtest/gtest.h"
#include "kvserve/v1/generation.grpc.pb.h"
#include "tests/server/serve/server_process.h"

namespace kvserve::testing {
namespace {

// A generation far longer than any test waits for (tens of seconds on the tiny model).
v1::GenerateRequest LongRequest() {
  v1::GenerateRequest r;
  r.add_prompts()->set_text("a long story begins here");
  r.mutable_stopping()->set_max_new_tokens(50000);
  r.mutable_stopping()->set_ignore_eos(true);
  return r;
}

std::vector<std::string> LongServerFlags() { return {"--max-context", "60000"}; }

bool PoolEmpty(const ServerProcess& s) {
  return s.Metric("kvserve_kv_pages_used") == 0.0 && s.Metric("kvserve_kv_pages_reserved") == 0.0 &&
         s.Metric("kvserve_num_requests_running") == 0.0;
}

TEST(GrpcCancelTest, MidStreamCancelReturnsPagesToThePool) {
  auto server = ServerProcess::Start(LongServerFlags());
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(PoolEmpty(*server)) << server->Metrics();
  auto stub = v1::Generation::NewStub(server->Channel());
  grpc::ClientContext ctx;
  auto reader = stub->GenerateStream(&ctx, LongRequest());
  v1::GenerateStreamResponse msg;
  int chunks = 0;
  while (chunks < 5 && reader->Read(&msg)) chunks += msg.has_chunk();
  ASSERT_EQ(chunks, 5);
  EXPECT_GT(server->Metric("kvserve_kv_pages_used").value_or(0), 0) << "a running request holds pages";
  EXPECT_EQ(server->Metric("kvserve_num_requests_running"), 1.0);

  ctx.TryCancel();
  while (reader->Read(&msg)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(WaitFor([&] { return PoolEmpty(*server); }, std::chrono::seconds(30))) << server->Metrics();
  EXPECT_TRUE(WaitFor([&] { return server->Metric("kvserve_request_success_total{finish_reason=\"cancelled\"}") == 1.0; },
                      std::chrono::seconds(30)));
  EXPECT_EQ(server->Health(), "SERVING");
}

TEST(GrpcCancelTest, DeadlineExceededAbortsAndFreesPages) {
  auto server = ServerProcess::Start(LongServerFlags());
  ASSERT_NE(server, nullptr);
  for (bool stream : {false, true}) {
    auto stub = v1::Generation::NewStub(server->Channel());
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
    grpc::Status st;
    if (stream) {
      auto reader = stub->GenerateStream(&ctx, LongRequest());
      v1::GenerateStreamResponse msg;
      while (reader->Read(&msg)) {
      }
      st = reader->Finish();
    } else {
      v1::GenerateResponse resp;
      st = stub->Generate(&ctx, LongRequest(), &resp);
    }
    EXPECT_EQ(st.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << "stream=" << stream;
    EXPECT_TRUE(WaitFor([&] { return PoolEmpty(*server); }, std::chrono::seconds(30)))
        << "stream=" << stream << "\n" << server->Metrics();
  }
  EXPECT_TRUE(WaitFor([&] { return server->Metric("kvserve_request_success_total{finish_reason=\"cancelled\"}") == 2.0; },
                      std::chrono::seconds(30)));
  // The server is as good as new: a short request still works.
  v1::GenerateRequest ok = LongRequest();
  ok.mutable_stopping()->set_max_new_tokens(4);
  grpc::ClientContext ctx;
  v1::GenerateResponse resp;
  ASSERT_TRUE(v1::Generation::NewStub(server->Channel())->Generate(&ctx, ok, &resp).ok());
  EXPECT_EQ(resp.completions(0).usage().generated_tokens(), 4);
}

}  // namespace
}  // namespace kvserve::testing
