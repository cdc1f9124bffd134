// End to end over loopback: concurrent streaming and unary calls give exactly what
// `kvserve generate` prints for the same prompt and settings; logprobs of generated and prompt
// tokens; tokenizer and info methods.
#include <cmath>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "kvserve/v1/generation.grpc.pb.h"
#include "tests/server/serve/server_process.h"

namespace kvserve::testing {
namespace {

struct Case {
  std::string prompt;
  int max_new_tokens;
  float temperature;  // 0 = greedy
  int seed;
};

const std::vector<Case> kCases = {
    {"hello", 24, 0, 0},
    {"The quick brown fox jumps over the lazy dog", 32, 0, 0},
    {"once upon a time", 16, 0.8f, 7},
    {"1, 2, 3, 4,", 40, 1.0f, 42},
};

v1::GenerateRequest Request(const Case& c) {
  v1::GenerateRequest r;
  r.add_prompts()->set_text(c.prompt);
  r.mutable_sampling()->set_temperature(c.temperature);
  r.mutable_sampling()->set_seed(c.seed);
  r.mutable_stopping()->set_max_new_tokens(c.max_new_tokens);
  r.mutable_stopping()->set_ignore_eos(true);
  return r;
}

// What the CLI prints (its completion, then a newline).
std::string CliOutput(const Case& c) {
  std::string cmd = BinaryPath("kvserve") + " generate --model random:tiny --ignore-eos --prompt '" + c.prompt +
                    "' --max-new-tokens " + std::to_string(c.max_new_tokens) +
                    " --temperature " + std::to_string(c.temperature) + " --seed " + std::to_string(c.seed);
  std::string out = RunCommand(cmd);
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::string Stream(const std::shared_ptr<grpc::Channel>& ch, const v1::GenerateRequest& req, v1::Completion* done) {
  auto stub = v1::Generation::NewStub(ch);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(300));
  auto reader = stub->GenerateStream(&ctx, req);
  v1::GenerateStreamResponse msg;
  std::string text;
  int chunks_after_complete = 0;
  bool complete = false;
  while (reader->Read(&msg)) {
    if (msg.has_chunk()) {
      text += msg.chunk().text();
      chunks_after_complete += complete;
    } else if (msg.has_complete()) {
      complete = true;
      *done = msg.complete();
    }
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_TRUE(complete) << "the stream ended without a complete message";
  EXPECT_EQ(chunks_after_complete, 0) << "complete must be the last message";
  return text;
}

TEST(GrpcE2eTest, ConcurrentStreamingAndUnaryEqualTheCli) {
  auto server = ServerProcess::Start();
  ASSERT_NE(server, nullptr);
  std::vector<std::string> expected;
  for (const Case& c : kCases) expected.push_back(CliOutput(c));

  // Every case twice as a stream and twice as a unary call, all at once.
  std::vector<std::string> streamed(kCases.size() * 2), unary(kCases.size() * 2);
  std::vector<v1::Completion> stream_done(kCases.size() * 2), unary_done(kCases.size() * 2);
  std::vector<std::thread> threads;
  for (size_t k = 0; k < kCases.size() * 2; ++k) {
    const Case& c = kCases[k % kCases.size()];
    threads.emplace_back([&, k, c] { streamed[k] = Stream(server->Channel(), Request(c), &stream_done[k]); });
    threads.emplace_back([&, k, c] {
      auto stub = v1::Generation::NewStub(server->Channel());
      grpc::ClientContext ctx;
      v1::GenerateResponse resp;
      grpc::Status st = stub->Generate(&ctx, Request(c), &resp);
      ASSERT_TRUE(st.ok()) << st.error_message();
      ASSERT_EQ(resp.completions_size(), 1);
      unary[k] = resp.completions(0).text();
      unary_done[k] = resp.completions(0);
    });
  }
  for (std::thread& t : threads) t.join();
  for (size_t k = 0; k < kCases.size() * 2; ++k) {
    const size_t i = k % kCases.size();
    EXPECT_EQ(streamed[k], expected[i]) << "stream of case " << i;
    EXPECT_EQ(unary[k], expected[i]) << "unary of case " << i;
    for (const v1::Completion* d : {&stream_done[k], &unary_done[k]}) {
      EXPECT_EQ(d->finish_reason(), v1::FINISH_REASON_LENGTH);
      EXPECT_EQ(d->usage().generated_tokens(), kCases[i].max_new_tokens);
      EXPECT_GT(d->usage().prompt_tokens(), 0);
      EXPECT_GT(d->timings().total_seconds(), 0);
      EXPECT_LE(d->timings().time_to_first_token_seconds(), d->timings().total_seconds());
    }
    EXPECT_EQ(unary_done[k].token_ids_size(), kCases[i].max_new_tokens);
  }
}

TEST(GrpcE2eTest, OneUnaryCallBatchesManyPromptsInOrder) {
  auto server = ServerProcess::Start();
  ASSERT_NE(server, nullptr);
  v1::GenerateRequest req = Request(kCases[0]);
  req.clear_prompts();
  for (const Case& c : kCases) req.add_prompts()->set_text(c.prompt);
  req.set_request_id("batch-1");
  auto stub = v1::Generation::NewStub(server->Channel());
  grpc::ClientContext ctx;
  v1::GenerateResponse resp;
  ASSERT_TRUE(stub->Generate(&ctx, req, &resp).ok());
  EXPECT_EQ(resp.request_id(), "batch-1");
  ASSERT_EQ(resp.completions_size(), static_cast<int>(kCases.size()));
  for (size_t i = 0; i < kCases.size(); ++i) {
    Case greedy = kCases[i];
    greedy.temperature = 0;
    greedy.seed = 0;
    greedy.max_new_tokens = kCases[0].max_new_tokens;
    EXPECT_EQ(resp.completions(i).index(), i);
    EXPECT_EQ(resp.completions(i).text(), CliOutput(greedy)) << "prompt " << i;
  }
}

TEST(GrpcE2eTest, AutoBudgetReportsItsEstimateInUsageAndMetrics) {
  auto server = ServerProcess::Start();
  ASSERT_NE(server, nullptr);
  std::string prompt;
  for (int i = 0; i < 60; ++i) prompt += "word" + std::to_string(i * 7 % 23) + " ";
  v1::GenerateRequest req = Request({prompt, 4, 0, 0});
  req.mutable_kv()->set_policy("snapkv");
  req.mutable_kv()->set_window(8);
  req.mutable_kv()->set_budget_auto_risk(0.5);
  auto stub = v1::Generation::NewStub(server->Channel());
  grpc::ClientContext ctx;
  v1::GenerateResponse resp;
  ASSERT_TRUE(stub->Generate(&ctx, req, &resp).ok());
  ASSERT_EQ(resp.completions_size(), 1);
  const v1::Usage& u = resp.completions(0).usage();
  ASSERT_TRUE(u.has_kv_compressibility());
  const v1::KvCompressibility& k = u.kv_compressibility();
  EXPECT_GT(k.trace(), 0);
  EXPECT_GE(k.effective_rank(), 1);
  EXPECT_GE(k.spectral_tail(), 0);
  EXPECT_LE(k.spectral_tail(), 1);
  // At least the window and the sinks, at most the prompt.
  EXPECT_GE(k.budget_tokens(), 8 + 4);
  EXPECT_LE(k.budget_tokens(), u.prompt_tokens());
  const std::string metrics = server->Metrics();
  for (const char* name : {"kvserve_request_kv_response_trace_count 1", "kvserve_request_kv_effective_rank_count 1",
                           "kvserve_request_kv_spectral_tail_count 1", "kvserve_request_kv_estimated_risk_count 1"}) {
    EXPECT_NE(metrics.find(name), std::string::npos) << name;
  }
  // kvctl asks for the same and prints what came back.
  const std::string kvctl = RunCommand(BinaryPath("kvctl") + " generate --addr " + server->address() + " --prompt '" +
                                       prompt + "' --max-new-tokens 2 --kv-policy snapkv --kv-budget auto:0.5 --usage 2>&1");
  EXPECT_NE(kvctl.find("kv: budget="), std::string::npos) << kvctl;
}

TEST(GrpcE2eTest, LogprobsComeWithEveryTokenUnaryAndStreamed) {
  auto server = ServerProcess::Start();
  ASSERT_NE(server, nullptr);
  Case greedy = kCases[0];
  greedy.temperature = 0;
  greedy.seed = 0;
  v1::GenerateRequest req = Request(greedy);
  req.mutable_logprobs()->set_top_logprobs(3);
  auto stub = v1::Generation::NewStub(server->Channel());
  auto check = [&](const google::protobuf::RepeatedField<int32_t>& ids,
                   const google::protobuf::RepeatedPtrField<v1::TokenLogprobs>& lps, const char* what) {
    ASSERT_EQ(lps.size(), ids.size()) << what;
    for (int t = 0; t < lps.size(); ++t) {
      const v1::TokenLogprobs& lp = lps[t];
      EXPECT_EQ(lp.token_id(), ids[t]) << what;
      ASSERT_EQ(lp.top_size(), 3) << what;
      // Greedy: the chosen token is the most likely one, and the list is sorted.
      EXPECT_EQ(lp.top(0).token_id(), ids[t]) << what << " token " << t;
      EXPECT_FLOAT_EQ(lp.top(0).logprob(), lp.logprob()) << what;
      EXPECT_LE(lp.top(0).logprob(), 0.0f);
      EXPECT_GE(lp.top(0).logprob(), lp.top(1).logprob());
      EXPECT_GE(lp.top(1).logprob(), lp.top(2).logprob());
      EXPECT_LE(std::exp(lp.top(0).logprob()) + std::exp(lp.top(1).logprob()) + std::exp(lp.top(2).logprob()),
                1.0001);
    }
  };
  grpc::ClientContext ctx;
  v1::GenerateResponse resp;
  ASSERT_TRUE(stub->Generate(&ctx, req, &resp).ok());
  ASSERT_EQ(resp.completions_size(), 1);
  check(resp.completions(0).token_ids(), resp.completions(0).logprobs(), "unary");

  grpc::ClientContext sctx;
  auto reader = stub->GenerateStream(&sctx, req);
  v1::GenerateStreamResponse msg;
  google::protobuf::RepeatedField<int32_t> ids;
  google::protobuf::RepeatedPtrField<v1::TokenLogprobs> lps;
  while (reader->Read(&msg)) {
    if (!msg.has_chunk()) continue;
    ids.MergeFrom(msg.chunk().token_ids());
    lps.MergeFrom(msg.chunk().logprobs());
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(absl::StrJoin(ids, " "), absl::StrJoin(resp.completions(0).token_ids(), " "));
  check(ids, lps, "stream");
}

TEST(GrpcE2eTest, PromptLogprobsComeInTheCompletionUnaryAndStreamed) {
  auto server = ServerProcess::Start();
  ASSERT_NE(server, nullptr);
  v1::GenerateRequest req;
  v1::Prompt* prompt = req.add_prompts();
  for (int id : {5, 17, 100, 42, 7, 300}) prompt->add_token_ids(id);
  req.mutable_logprobs()->set_prompt_logprobs(2);
  req.mutable_stopping()->set_max_new_tokens(0);  // score only
  auto stub = v1::Generation::NewStub(server->Channel());
  grpc::ClientContext ctx;
  v1::GenerateResponse resp;
  ASSERT_TRUE(stub->Generate(&ctx, req, &resp).ok());
  const v1::Completion& c = resp.completions(0);
  EXPECT_EQ(c.finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(c.token_ids_size(), 0);
  ASSERT_EQ(c.prompt_logprobs_size(), 5) << "one per prompt token after the first";
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(c.prompt_logprobs(i).token_id(), req.prompts(0).token_ids(i + 1));
    EXPECT_LE(c.prompt_logprobs(i).logprob(), 0.0f);
    ASSERT_EQ(c.prompt_logprobs(i).top_size(), 2);
    EXPECT_GE(c.prompt_logprobs(i).top(0).logprob(), c.prompt_logprobs(i).logprob());
  }
  // A stream carries them in its complete message, with the generated tokens in chunks.
  req.mutable_stopping()->set_max_new_tokens(3);
  grpc::ClientContext sctx;
  auto reader = stub->GenerateStream(&sctx, req);
  v1::GenerateStreamResponse msg;
  v1::Completion done;
  while (reader->Read(&msg)) {
    if (msg.has_complete()) done = msg.complete();
  }
  ASSERT_TRUE(reader->Finish().ok());
  ASSERT_EQ(done.prompt_logprobs_size(), 5);
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(done.prompt_logprobs(i).logprob(), c.prompt_logprobs(i).logprob(), 1e-5);
  // Without prompt_logprobs, max_new_tokens 0 is refused naming both fields.
  req.mutable_logprobs()->clear_prompt_logprobs();
  req.mutable_stopping()->set_max_new_tokens(0);
  grpc::ClientContext bctx;
  const grpc::Status bad = stub->Generate(&bctx, req, &resp);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(bad.error_message().find("0 only with logprobs.prompt_logprobs"), std::string::npos) << bad.error_message();
}

TEST(GrpcE2eTest, TokenizeInputIsBoundedByTheFlag) {
  auto server = ServerProcess::Start({"--max-tokenize-bytes", "100"});
  ASSERT_NE(server, nullptr);
  auto stub = v1::Generation::NewStub(server->Channel());
  for (size_t n : {100, 101}) {
    grpc::ClientContext ctx;
    v1::TokenizeRequest req;
    req.set_text(std::string(n, 'a'));
    v1::TokenizeResponse resp;
    const grpc::Status st = stub->Tokenize(&ctx, req, &resp);
    if (n == 100) {
      EXPECT_TRUE(st.ok()) << st.error_message();
    } else {
      EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
      EXPECT_EQ(st.error_message(), "text has 101 bytes, the limit is 100 (--max-tokenize-bytes)");
    }
  }
}

TEST(GrpcE2eTest, TokenizeDetokenizeAndModelInfo) {
  auto server = ServerProcess::Start({"--max-context", "8192"});
  ASSERT_NE(server, nullptr);
  auto stub = v1::Generation::NewStub(server->Channel());
  {
    grpc::ClientContext ctx;
    v1::TokenizeRequest req;
    req.set_text("hello world");
    v1::TokenizeResponse resp;
    ASSERT_TRUE(stub->Tokenize(&ctx, req, &resp).ok());
    const std::string ids = absl::StrJoin(resp.token_ids(), " ");
    std::string cli = RunCommand(BinaryPath("kvserve") + " tokenize --model random:tiny --text 'hello world'");
    EXPECT_EQ(ids + "\n", cli);
    EXPECT_EQ(resp.pieces_size(), resp.token_ids_size());

    grpc::ClientContext ctx2;
    v1::DetokenizeRequest dreq;
    dreq.mutable_token_ids()->CopyFrom(resp.token_ids());
    v1::DetokenizeResponse dresp;
    ASSERT_TRUE(stub->Detokenize(&ctx2, dreq, &dresp).ok());
    EXPECT_EQ(dresp.text(), "hello world");
  }
  {
    // Byte-level pieces of one character: each piece alone is not UTF-8. Strict clients (this
    // C++ one included) reject a string field that is not, so the call must still succeed.
    grpc::ClientContext ctx;
    v1::TokenizeRequest req;
    req.set_text("\xc3\xa9\xf0\x9f\x99\x82");  // "é🙂"
    v1::TokenizeResponse resp;
    ASSERT_TRUE(stub->Tokenize(&ctx, req, &resp).ok());
    ASSERT_EQ(resp.piece_bytes_size(), resp.token_ids_size());
    EXPECT_EQ(absl::StrJoin(resp.piece_bytes(), ""), req.text());
    EXPECT_GT(resp.token_ids_size(), 2);  // random:tiny's byte-level vocabulary splits them
    for (const std::string& piece : resp.pieces()) EXPECT_FALSE(piece.empty());

    grpc::ClientContext whole_ctx, part_ctx;
    v1::DetokenizeRequest whole, part;
    whole.mutable_token_ids()->CopyFrom(resp.token_ids());
    part.add_token_ids(resp.token_ids(0));  // ends inside "é"
    v1::DetokenizeResponse whole_resp, part_resp;
    ASSERT_TRUE(stub->Detokenize(&whole_ctx, whole, &whole_resp).ok());
    EXPECT_EQ(whole_resp.text(), req.text());
    EXPECT_FALSE(whole_resp.replaced_invalid_utf8());
    ASSERT_TRUE(stub->Detokenize(&part_ctx, part, &part_resp).ok());
    EXPECT_TRUE(part_resp.replaced_invalid_utf8());
    EXPECT_EQ(part_resp.text(), "\xef\xbf\xbd");  // U+FFFD
  }
  grpc::ClientContext ctx;
  v1::GetModelInfoResponse info;
  ASSERT_TRUE(stub->GetModelInfo(&ctx, v1::GetModelInfoRequest(), &info).ok());
  EXPECT_EQ(info.n_layers(), 2);
  EXPECT_EQ(info.vocab_size(), 512);
  EXPECT_EQ(info.max_context(), 8192);
  EXPECT_EQ(info.trained_context(), 4096);
  EXPECT_GT(info.kv_pages_total(), 0);
  EXPECT_GE(info.kv_policies_size(), 5);
}

TEST(GrpcE2eTest, KvctlGeneratesAndReportsHealth) {
  auto server = ServerProcess::Start();
  ASSERT_NE(server, nullptr);
  const Case c = kCases[0];
  const std::string flags = " --prompt hello --max-new-tokens 24 --ignore-eos";
  EXPECT_EQ(RunCommand(BinaryPath("kvctl") + " generate --addr " + server->address() + flags), CliOutput(c) + "\n");
  EXPECT_EQ(RunCommand(BinaryPath("kvctl") + " generate --stream --addr " + server->address() + flags),
            CliOutput(c) + "\n");
  EXPECT_EQ(RunCommand(BinaryPath("kvctl") + " health --addr " + server->address()), "SERVING\n");
  EXPECT_NE(RunCommand(BinaryPath("kvctl") + " info --addr " + server->address()).find("n_layers: 2"),
            std::string::npos);
}

// --prompt-file sends a file's text as one prompt (prompts too long for one argv string);
// bench reports the time to the first streamed token; bad values are named.
TEST(GrpcE2eTest, KvctlPromptFileAndStreamingBench) {
  auto server = ServerProcess::Start();
  ASSERT_NE(server, nullptr);
  const std::string file = ::testing::TempDir() + "/kvctl_prompt.txt";
  { std::ofstream(file) << "hello"; }
  const std::string kvctl = BinaryPath("kvctl");
  const std::string gen = " --max-new-tokens 24 --ignore-eos";
  EXPECT_EQ(RunCommand(kvctl + " generate --addr " + server->address() + " --prompt-file " + file + gen),
            CliOutput(kCases[0]) + "\n");

  const std::string missing = RunCommand(kvctl + " generate --addr " + server->address() +
                                         " --prompt-file /nonexistent/p.txt 2>&1; echo rc=$?");
  EXPECT_NE(missing.find("--prompt-file '/nonexistent/p.txt' cannot be read"), std::string::npos) << missing;
  EXPECT_NE(missing.find("rc=1"), std::string::npos) << missing;

  const std::string bench = RunCommand(kvctl + " bench --stream --clients 2 --requests 6 --warmup 0 --addr " +
                                       server->address() + " --prompt-file " + file + " --max-new-tokens 4");
  EXPECT_NE(bench.find("stream clients=2 requests=6"), std::string::npos) << bench;
  EXPECT_NE(bench.find("errors=0"), std::string::npos) << bench;
  const size_t at = bench.find("ttft_p50_ms=");
  ASSERT_NE(at, std::string::npos) << bench;
  const double ttft_ms = std::stod(bench.substr(at + 12));
  const double p50_ms = std::stod(bench.substr(bench.find("p50_ms=") + 7));
  EXPECT_GT(ttft_ms, 0.0) << bench;
  EXPECT_LE(ttft_ms, p50_ms * 1.5) << "the first token cannot come after the median whole call: " << bench;

  const std::string bad = RunCommand(kvctl + " bench --warmup -1 --addr " + server->address() + " 2>&1; echo rc=$?");
  EXPECT_NE(bad.find("--warmup (-1)"), std::string::npos) << bad;
}

}  // namespace
}  // namespace kvserve::testing
