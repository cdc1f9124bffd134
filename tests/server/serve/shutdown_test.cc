// Graceful shutdown: SIGTERM stops admission (health NOT_SERVING, new calls UNAVAILABLE),
// lets running streams finish within --drain-timeout, cancels the rest cleanly, and exits 0.
#include <signal.h>

#include <thread>

#include "gtest/gtest.h"
#include "kvserve/v1/generation.grpc.pb.h"
#include "tests/server/serve/server_process.h"

namespace kvserve::testing {
namespace {

v1::GenerateRequest Request(int max_new_tokens) {
  v1::GenerateRequest r;
  r.add_prompts()->set_text("shutdown test");
  r.mutable_stopping()->set_max_new_tokens(max_new_tokens);
  r.mutable_stopping()->set_ignore_eos(true);
  return r;
}

// Reads a stream to its end: the final Completion and the call status.
struct Outcome {
  grpc::Status status;
  v1::Completion complete;
  int chunks = 0;
};

Outcome Drain(grpc::ClientReader<v1::GenerateStreamResponse>& reader) {
  Outcome o;
  v1::GenerateStreamResponse msg;
  while (reader.Read(&msg)) {
    if (msg.has_chunk()) ++o.chunks;
    if (msg.has_complete()) o.complete = msg.complete();
  }
  o.status = reader.Finish();
  return o;
}

TEST(GrpcShutdownTest, SigtermCancelsALongStreamCleanlyAfterTheDrainTimeout) {
  auto server = ServerProcess::Start({"--drain-timeout", "2", "--max-context", "60000"});
  ASSERT_NE(server, nullptr);
  auto stub = v1::Generation::NewStub(server->Channel());
  grpc::ClientContext ctx;
  auto reader = stub->GenerateStream(&ctx, Request(50000));
  v1::GenerateStreamResponse first;
  ASSERT_TRUE(reader->Read(&first));

  const auto t0 = std::chrono::steady_clock::now();
  kill(server->pid(), SIGTERM);
  // While draining: not serving, and new work is refused.
  EXPECT_TRUE(WaitFor([&] { return server->Health() == "NOT_SERVING"; }, std::chrono::seconds(10)));
  {
    grpc::ClientContext c2;
    v1::GenerateResponse resp;
    grpc::Status st = v1::Generation::NewStub(server->Channel())->Generate(&c2, Request(2), &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE) << st.error_message();
  }
  const Outcome o = Drain(*reader);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(o.status.ok()) << o.status.error_message();
  EXPECT_EQ(o.complete.finish_reason(), v1::FINISH_REASON_CANCELLED);
  EXPECT_FALSE(o.complete.error().empty());
  EXPECT_GT(o.complete.usage().generated_tokens(), 0);
  EXPECT_LT(took, 30) << "the drain timeout is 2 s";
  EXPECT_EQ(server->Wait(std::chrono::seconds(60)), 0) << server->Log();
}

TEST(GrpcShutdownTest, SigtermLetsAShortStreamFinish) {
  auto server = ServerProcess::Start({"--drain-timeout", "120"});
  ASSERT_NE(server, nullptr);
  auto stub = v1::Generation::NewStub(server->Channel());
  grpc::ClientContext ctx;
  auto reader = stub->GenerateStream(&ctx, Request(300));
  v1::GenerateStreamResponse first;
  ASSERT_TRUE(reader->Read(&first));
  kill(server->pid(), SIGTERM);
  const Outcome o = Drain(*reader);
  EXPECT_TRUE(o.status.ok()) << o.status.error_message();
  EXPECT_EQ(o.complete.finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(o.complete.usage().generated_tokens(), 300);
  // It exits as soon as the stream is done, well before the 120 s drain timeout.
  EXPECT_EQ(server->Wait(std::chrono::seconds(60)), 0) << server->Log();
}

}  // namespace
}  // namespace kvserve::testing
