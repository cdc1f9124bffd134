// A 128K-token prompt passes the server's message limits (as ids and as text, with the
// default --max-receive-message-bytes), and a prompt over --max-context is refused with a
// message naming the limit.
#include <cstdio>
#include <random>
#include <string>

#include "gtest/gtest.h"
#include "kvserve/v1/generation.grpc.pb.h"
#include "tests/server/serve/server_process.h"

namespace kvserve::testing {
namespace {

constexpr int kPromptTokens = 128 * 1024;

v1::GenerateRequest LongIdsRequest() {
  v1::GenerateRequest req;
  std::mt19937 rng(1);
  v1::Prompt* p = req.add_prompts();
  for (int i = 0; i < kPromptTokens; ++i) p->add_token_ids(static_cast<int32_t>(rng() % 512));
  req.mutable_stopping()->set_max_new_tokens(4);
  req.mutable_stopping()->set_ignore_eos(true);
  req.mutable_kv()->set_policy("snapkv");
  req.mutable_kv()->set_budget(2048);
  req.mutable_kv()->set_compress_at("chunk");  // bounds the cache to budget + one chunk
  return req;
}

// The receive limit lets both 128K-token forms through: the server answers with its own
// context check (naming the limit), not gRPC's RESOURCE_EXHAUSTED for the message size.
TEST(GrpcLongPromptTest, A128KTokenMessagePassesTheReceiveLimitAndTheContextLimitIsNamed) {
  auto server = ServerProcess::Start();  // default --max-receive-message-bytes, context 4096
  ASSERT_NE(server, nullptr);
  auto stub = v1::Generation::NewStub(server->Channel());
  {
    grpc::ClientContext ctx;
    v1::GenerateResponse resp;
    const grpc::Status st = stub->Generate(&ctx, LongIdsRequest(), &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
    EXPECT_NE(st.error_message().find("prompts[0] has 131072 tokens; the limit is 4095 (--max-context 4096"),
              std::string::npos)
        << st.error_message();
  }
  {
    // ~8 bytes of text per token, more than any tokenizer packs: 1 MiB of text.
    v1::GenerateRequest req = LongIdsRequest();
    req.mutable_prompts(0)->clear_token_ids();
    std::string text;
    for (int i = 0; text.size() < size_t{kPromptTokens} * 8; ++i) text += "word" + std::to_string(i % 1000) + " ";
    req.mutable_prompts(0)->set_text(text);
    grpc::ClientContext ctx;
    v1::GenerateResponse resp;
    const grpc::Status st = stub->Generate(&ctx, req, &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
    EXPECT_NE(st.error_message().find("the limit is 4095"), std::string::npos) << st.error_message();
  }
  EXPECT_EQ(server->Health(), "SERVING");
}

// With SnapKV compressing after every prefill chunk the cache stays near budget + chunk
// (~3 MB here instead of ~70 MB for the full cache), so the quadratic attention over
// 131072 tokens shrinks to about a minute on a loaded 2-core machine.
TEST(GrpcLongPromptTest, A128KTokenPromptFinishesWithCompression) {
  // The context gets a little room above 131072 for the generated tokens.
  auto server = ServerProcess::Start({"--max-context", "131200", "--kv-memory", "256M", "--prefill-chunk", "4096",
                                      "--max-batch-tokens", "4096"});
  ASSERT_NE(server, nullptr);
  const v1::GenerateRequest req = LongIdsRequest();
  ASSERT_GT(req.ByteSizeLong(), 128u * 1024) << "the request is a real 128K-token message";

  auto stub = v1::Generation::NewStub(server->Channel());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(60));
  auto reader = stub->GenerateStream(&ctx, req);
  v1::GenerateStreamResponse msg;
  v1::Completion done;
  int tokens = 0;
  while (reader->Read(&msg)) {
    if (msg.has_chunk()) tokens += msg.chunk().token_ids_size();
    if (msg.has_complete()) done = msg.complete();
  }
  grpc::Status st = reader->Finish();
  std::printf("128K prompt: time to first token %.1f s, total %.1f s, KV kept %lld entries, peak %lld bytes\n",
              done.timings().time_to_first_token_seconds(), done.timings().total_seconds(),
              static_cast<long long>(done.usage().kv_tokens_kept()), static_cast<long long>(done.usage().peak_kv_bytes()));
  ASSERT_TRUE(st.ok()) << st.error_code() << ": " << st.error_message();
  EXPECT_EQ(tokens, 4);
  EXPECT_EQ(done.finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(done.usage().prompt_tokens(), kPromptTokens);
  EXPECT_GT(done.timings().time_to_first_token_seconds(), 0);
  EXPECT_EQ(server->Metric("kvserve_kv_pages_used"), 0.0);
}

}  // namespace
}  // namespace kvserve::testing
