// Bad requests: each kind gets the right status code and a message naming the field and
// value, over both Generate and GenerateStream, and the server stays healthy and keeps
// serving. Backpressure and pool limits get RESOURCE_EXHAUSTED.
#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kvserve/v1/generation.grpc.pb.h"
#include "tests/server/serve/server_process.h"

namespace kvserve::testing {
namespace {

v1::GenerateRequest Good() {
  v1::GenerateRequest r;
  r.add_prompts()->set_text("hello");
  r.mutable_stopping()->set_max_new_tokens(4);
  return r;
}

struct BadCase {
  std::string name;
  std::function<void(v1::GenerateRequest&)> spoil;
  grpc::StatusCode code;
  std::string message;  // a substring the error message must contain
};

std::vector<BadCase> Cases() {
  using R = v1::GenerateRequest;
  const auto ids = [](R& r, std::vector<int32_t> v) {
    r.mutable_prompts(0)->clear_text();
    r.mutable_prompts(0)->mutable_token_ids()->Assign(v.begin(), v.end());
  };
  const auto kInvalid = grpc::StatusCode::INVALID_ARGUMENT;
  return {
      {"no_prompts", [](R& r) { r.clear_prompts(); }, kInvalid, "prompts: "},
      {"empty_prompt", [](R& r) { r.mutable_prompts(0)->clear_text(); }, kInvalid, "prompts[0] is empty"},
      {"text_and_ids", [](R& r) { r.mutable_prompts(0)->add_token_ids(5); }, kInvalid, "more than one"},
      {"unknown_token_id", [&](R& r) { ids(r, {1, 9999}); }, kInvalid, "prompts[0].token_ids[1] = 9999"},
      {"negative_token_id", [&](R& r) { ids(r, {-3}); }, kInvalid, "token_ids[0] = -3"},
      {"negative_temperature", [](R& r) { r.mutable_sampling()->set_temperature(-1); }, kInvalid, "temperature"},
      {"top_p_above_1", [](R& r) { r.mutable_sampling()->set_top_p(1.5f); }, kInvalid, "top_p must be in (0, 1], got 1.5"},
      {"top_p_zero", [](R& r) { r.mutable_sampling()->set_top_p(0); }, kInvalid, "top_p"},
      {"min_p_above_1", [](R& r) { r.mutable_sampling()->set_min_p(2); }, kInvalid, "min_p"},
      {"negative_top_k", [](R& r) { r.mutable_sampling()->set_top_k(-1); }, kInvalid, "top_k"},
      {"zero_repetition_penalty", [](R& r) { r.mutable_sampling()->set_repetition_penalty(0); }, kInvalid,
       "repetition_penalty"},
      {"max_new_tokens_zero", [](R& r) { r.mutable_stopping()->set_max_new_tokens(0); }, kInvalid,
       "stopping.max_new_tokens must be >= 1 (0 only with logprobs.prompt_logprobs), got 0"},
      {"prompt_logprobs_above_20", [](R& r) { r.mutable_logprobs()->set_prompt_logprobs(21); }, kInvalid,
       "logprobs.prompt_logprobs must be in [0, 20], got 21"},
      {"max_new_tokens_huge", [](R& r) { r.mutable_stopping()->set_max_new_tokens(4000000000u); }, kInvalid,
       "stopping.max_new_tokens = 4000000000 is above the limit 4096"},
      {"prompt_plus_new_over_context", [&](R& r) {
         ids(r, std::vector<int32_t>(200, 7));
         r.mutable_stopping()->set_max_new_tokens(4000);
       }, kInvalid, "exceed the context limit 4096"},
      {"prompt_over_limit", [&](R& r) { ids(r, std::vector<int32_t>(5000, 7)); }, kInvalid,
       "prompts[0] has 5000 tokens; the limit is 4095"},
      {"unknown_policy", [](R& r) { r.mutable_kv()->set_policy("magic"); }, kInvalid, "kv.policy 'magic'"},
      // A 100 KB value quoted back whole would pass the client's metadata limit ("Stream removed").
      {"huge_policy_name", [](R& r) { r.mutable_kv()->set_policy(std::string(100000, 'x')); }, kInvalid,
       "kv.policy 'xxxxxxxx"},
      {"negative_budget", [](R& r) { r.mutable_kv()->set_budget(-0.5); }, kInvalid, "kv.budget must be > 0, got -0.5"},
      {"zero_budget", [](R& r) { r.mutable_kv()->set_budget(0); }, kInvalid, "kv.budget must be > 0, got 0"},
      {"fractional_token_budget", [](R& r) { r.mutable_kv()->set_budget(10.5); }, kInvalid, "whole number"},
      {"budget_2_to_63", [](R& r) { r.mutable_kv()->set_budget(9223372036854775808.0); }, kInvalid,
       "kv.budget counts at most 1073741824 tokens, got 9.22337e+18"},
      {"budget_1e300", [](R& r) { r.mutable_kv()->set_budget(1e300); }, kInvalid,
       "kv.budget counts at most 1073741824 tokens, got 1e+300"},
      {"unknown_budget_plan", [](R& r) { r.mutable_kv()->set_budget_plan("zigzag"); }, kInvalid, "kv.budget_plan"},
      {"zero_auto_risk", [](R& r) { r.mutable_kv()->set_budget_auto_risk(0); }, kInvalid,
       "kv.budget_auto_risk must be > 0, got 0"},
      {"auto_risk_and_budget", [](R& r) {
         r.mutable_kv()->set_budget_auto_risk(0.5);
         r.mutable_kv()->set_budget(0.2);
       }, kInvalid, "kv.budget and kv.budget_auto_risk exclude each other"},
      {"auto_risk_in_chunk_mode", [](R& r) {
         r.mutable_kv()->set_budget_auto_risk(0.5);
         r.mutable_kv()->set_compress_at("chunk");
       }, kInvalid, "needs kv.compress_at prefill_end"},
      {"unknown_chunk_scoring", [](R& r) { r.mutable_kv()->set_chunk_scoring("answer"); }, kInvalid,
       "kv.chunk_scoring 'answer' is unknown"},
      {"unknown_evicted_weight", [](R& r) { r.mutable_kv()->set_evicted_weight("average"); }, kInvalid,
       "kv.evicted_weight 'average' is unknown; use one of drop, merge"},
      {"evicted_weight_with_merge_reduce",
       [](R& r) {
         r.mutable_kv()->set_policy("mergereduce:random");
         r.mutable_kv()->set_evicted_weight("merge");
       }, kInvalid, "kv.evicted_weight merge applies to the scoring policies; kv.policy mergereduce:random"},
      {"question_tokens_zero", [](R& r) { r.mutable_kv()->set_question_tokens(0); }, kInvalid,
       "kv.question_tokens must be in [1, 4096], got 0"},
      {"question_tokens_negative", [](R& r) { r.mutable_kv()->set_question_tokens(-5); }, kInvalid,
       "kv.question_tokens must be in [1, 4096], got -5"},
      {"question_tokens_at_prefill_end", [](R& r) {
         r.mutable_kv()->set_question_tokens(2);
         r.mutable_kv()->set_compress_at("prefill_end");
       }, kInvalid, "kv.question_tokens 2 needs kv.compress_at chunk"},
      {"chunk_headroom_negative", [](R& r) { r.mutable_kv()->set_chunk_headroom(-1); }, kInvalid,
       "kv.chunk_headroom must be in [0, 1073741824] tokens, got -1"},
      {"sink_tokens_negative", [](R& r) { r.mutable_kv()->set_sink_tokens(-1); }, kInvalid,
       "kv.sink_tokens must be in [0, 1073741824], got -1"},
      {"sink_tokens_huge", [](R& r) { r.mutable_kv()->set_sink_tokens(int64_t{1} << 40); }, kInvalid,
       "kv.sink_tokens must be in [0, 1073741824], got 1099511627776"},
      {"chunk_headroom_at_prefill_end", [](R& r) {
         r.mutable_kv()->set_chunk_headroom(2048);
         r.mutable_kv()->set_compress_at("prefill_end");
       }, kInvalid, "kv.chunk_headroom 2048 needs kv.compress_at chunk"},
      {"question_tokens_with_window_scoring", [](R& r) {
         r.mutable_kv()->set_question_tokens(2);
         r.mutable_kv()->set_chunk_scoring("window");
       }, kInvalid, "kv.question_tokens 2 needs kv.chunk_scoring question"},
      {"question_longer_than_prompt", [](R& r) {
         r.mutable_kv()->set_policy("snapkv");
         r.mutable_kv()->set_compress_at("chunk");
         r.mutable_kv()->set_question_tokens(4000);
       }, kInvalid, "question_tokens 4000 is longer than the prompt's"},
      {"window_too_large", [](R& r) { r.mutable_kv()->set_window(5000); }, kInvalid,
       "kv.window must be in [1, 4096], got 5000"},
      {"pool_kernel_too_large", [](R& r) { r.mutable_kv()->set_pool_kernel(301); }, kInvalid,
       "kv.pool_kernel must be odd and in [1, 255], got 301"},
      {"layer_budgets_wrong_count", [](R& r) { r.mutable_kv()->add_layer_budgets(64); }, kInvalid,
       "kv.layer_budgets has 1 entries, the model has 2 layers"},
      {"empty_stop_sequence", [](R& r) { r.mutable_stopping()->add_stop_sequences(""); }, kInvalid,
       "stopping.stop_sequences[0] is empty"},
      {"stop_token_outside_vocab", [](R& r) { r.mutable_stopping()->add_stop_token_ids(100000); }, kInvalid,
       "stopping.stop_token_ids[0] = 100000"},
      {"too_many_logprobs", [](R& r) { r.mutable_logprobs()->set_top_logprobs(50); }, kInvalid, "top_logprobs"},
      {"chat_without_template", [](R& r) {
         r.mutable_prompts(0)->clear_text();
         auto* m = r.mutable_prompts(0)->add_messages();
         m->set_role("user");
         m->set_content("hi");
       }, kInvalid, "has no chat template"},
      {"request_id_too_long", [](R& r) { r.set_request_id(std::string(300, 'x')); }, kInvalid, "request_id"},
      {"oversized_message", [](R& r) { r.mutable_prompts(0)->set_text(std::string(2 << 20, 'a')); },
       grpc::StatusCode::RESOURCE_EXHAUSTED, ""},
  };
}

grpc::Status CallStream(ServerProcess& s, const v1::GenerateRequest& r) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto reader = v1::Generation::NewStub(s.Channel())->GenerateStream(&ctx, r);
  v1::GenerateStreamResponse msg;
  while (reader->Read(&msg)) {
  }
  return reader->Finish();
}

TEST(GrpcBadRequestTest, EachKindGetsItsStatusAndTheServerStaysHealthy) {
  // A 1 MiB receive limit makes the oversized case cheap.
  auto server = ServerProcess::Start({"--max-receive-message-bytes", "1048576"});
  ASSERT_NE(server, nullptr);
  const std::vector<BadCase> cases = Cases();
  ASSERT_GE(cases.size(), 15u);
  for (const BadCase& c : cases) {
    v1::GenerateRequest r = Good();
    c.spoil(r);
    for (bool stream : {false, true}) {
      const grpc::Status st = stream ? CallStream(*server, r) : CallUnary(*server, r);
      EXPECT_EQ(st.error_code(), c.code) << c.name << " stream=" << stream << ": " << st.error_message();
      EXPECT_NE(st.error_message().find(c.message), std::string::npos)
          << c.name << " stream=" << stream << ": '" << st.error_message() << "' lacks '" << c.message << "'";
    }
    ASSERT_EQ(server->Health(), "SERVING") << "after " << c.name;
  }
  // Stream-only rule: exactly one prompt.
  v1::GenerateRequest two = Good();
  two.add_prompts()->set_text("again");
  EXPECT_EQ(CallStream(*server, two).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(CallUnary(*server, two).ok());
  // Still serving good requests, and nothing leaked.
  EXPECT_TRUE(CallUnary(*server, Good()).ok());
  EXPECT_TRUE(CallStream(*server, Good()).ok());
  EXPECT_TRUE(WaitFor([&] { return server->Metric("kvserve_kv_pages_reserved") == 0.0; }, std::chrono::seconds(30)));
  EXPECT_GE(server->Metric("kvserve_request_rejected_total{reason=\"invalid_argument\"}").value_or(0), 40);
}

TEST(GrpcBadRequestTest, FullQueueAndOversizedRequestsAreResourceExhausted) {
  // One running sequence at a time and no waiting room: a second request is refused.
  auto server = ServerProcess::Start({"--max-batch-tokens", "1", "--max-waiting", "0", "--max-context", "60000",
                                      "--kv-memory", "8M"});
  ASSERT_NE(server, nullptr);
  v1::GenerateRequest longreq = Good();
  longreq.mutable_stopping()->set_max_new_tokens(20000);
  longreq.mutable_stopping()->set_ignore_eos(true);
  grpc::ClientContext ctx;
  auto reader = v1::Generation::NewStub(server->Channel())->GenerateStream(&ctx, longreq);
  v1::GenerateStreamResponse msg;
  ASSERT_TRUE(reader->Read(&msg));  // it is running
  for (bool stream : {false, true}) {
    const grpc::Status st = stream ? CallStream(*server, Good()) : CallUnary(*server, Good());
    EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
    EXPECT_NE(st.error_message().find("waiting queue is full"), std::string::npos) << st.error_message();
  }
  ctx.TryCancel();
  while (reader->Read(&msg)) {
  }
  reader->Finish();
  EXPECT_TRUE(WaitFor([&] { return server->Metric("kvserve_num_requests_running") == 0.0; }, std::chrono::seconds(30)));
  EXPECT_TRUE(CallUnary(*server, Good()).ok());

  // 59900 tokens need 7488 pages; 8M holds 3855 (of f16 K/V, the CPU default): never admissible.
  v1::GenerateRequest huge = Good();
  huge.mutable_stopping()->set_max_new_tokens(59000);
  huge.mutable_prompts(0)->clear_text();
  for (int i = 0; i < 900; ++i) huge.mutable_prompts(0)->add_token_ids(7);
  const grpc::Status st = CallUnary(*server, huge);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  EXPECT_NE(st.error_message().find("KV pages"), std::string::npos) << st.error_message();
  EXPECT_GE(server->Metric("kvserve_request_rejected_total{reason=\"queue_full\"}").value_or(0), 2);
  EXPECT_EQ(server->Health(), "SERVING");
}

}  // namespace
}  // namespace kvserve::testing
