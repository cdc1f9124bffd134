// The OpenAI-compatible HTTP API of a real `kvserve serve --http-port 0` (random:tiny): the same
// output as gRPC for the same request, SSE streams that end with usage and [DONE], OpenAI-shaped
// errors with the right status for bad bodies, keys, a full queue and a draining server, and
// the port's defences: a client that hangs up has its request aborted and its pages freed; one
// that stalls is dropped after --http-timeout while others are served.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "httplib.h"
#include "kvserve/v1/generation.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "tests/server/serve/server_process.h"
#include "tests/server/serve/simultaneous_calls.h"

namespace kvserve::testing {
namespace {

using nlohmann::json;

std::unique_ptr<ServerProcess> StartHttp(std::vector<std::string> extra = {}) {
  extra.insert(extra.end(), {"--http-port", "0"});
  auto s = ServerProcess::Start(extra);
  if (s && s->http_port() <= 0) ADD_FAILURE() << "no http= line in the port file";
  return s;
}

struct Reply {
  int status = -1;
  std::string body;
  std::string retry_after;
  json Json() const { return json::parse(body, nullptr, /*allow_exceptions=*/false); }
};

Reply Post(const ServerProcess& s, const std::string& path, const std::string& body,
           const std::string& api_key = "") {
  httplib::Client c("127.0.0.1", s.http_port());
  c.set_read_timeout(60, 0);
  httplib::Headers h;
  if (!api_key.empty()) h.emplace("Authorization", "Bearer " + api_key);
  httplib::Result r = c.Post(path.c_str(), h, body, "application/json");
  if (!r) return {};
  return {r->status, r->body, r->get_header_value("Retry-After")};
}

Reply Get(const ServerProcess& s, const std::string& path) {
  httplib::Client c("127.0.0.1", s.http_port());
  httplib::Result r = c.Get(path.c_str());
  if (!r) return {};
  return {r->status, r->body, ""};
}

// A connected socket to the HTTP port; -1 on failure.
int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Sends a POST on a raw socket and reads until `want` bytes came (the response has begun).
int StartRawPost(int port, const std::string& body, size_t want = 1) {
  const int fd = Connect(port);
  if (fd < 0) return -1;
  const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n" + body;
  if (write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) return -1;
  timeval tv{30, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  size_t got = 0;
  char buf[4096];
  while (got < want) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  return fd;
}

std::string Text(const json& reply) { return reply["choices"][0]["text"].get<std::string>(); }

TEST(HttpApiTest, CompletionMatchesGrpcForTheSameRequest) {
  auto server = StartHttp();
  ASSERT_NE(server, nullptr);
  const Reply r = Post(*server, "/v1/completions",
                       R"({"model": "anything", "prompt": [1, 2, 3, 4], "max_tokens": 8, "temperature": 0.8,
                          "seed": 7, "ignore_eos": true})");
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = r.Json();
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], "random:tiny:0");  // --model as the loader names it (the preset and its seed)
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 4);
  EXPECT_EQ(j["usage"]["completion_tokens"], 8);
  EXPECT_EQ(j["usage"]["total_tokens"], 12);
  EXPECT_GT(j["usage"]["kv"]["peak_kv_bytes"].get<int64_t>(), 0);

  v1::GenerateRequest g;
  for (int id : {1, 2, 3, 4}) g.add_prompts()->add_token_ids(id);
  g.mutable_prompts()->DeleteSubrange(1, 3);
  for (int id : {2, 3, 4}) g.mutable_prompts(0)->add_token_ids(id);
  g.mutable_sampling()->set_temperature(0.8f);
  g.mutable_sampling()->set_seed(7);
  g.mutable_stopping()->set_max_new_tokens(8);
  g.mutable_stopping()->set_ignore_eos(true);
  v1::GenerateResponse resp;
  ASSERT_TRUE(CallUnary(*server, g, &resp).ok());
  EXPECT_EQ(Text(j), resp.completions(0).text()) << "one request path: the same seed gives the same text";

  // n choices draw from seed, seed+1, ...: the first is the single request's.
  const Reply n3 = Post(*server, "/v1/completions",
                        R"({"prompt": [1, 2, 3, 4], "max_tokens": 8, "temperature": 0.8, "seed": 7, "n": 3,
                           "ignore_eos": true})");
  ASSERT_EQ(n3.status, 200) << n3.body;
  ASSERT_EQ(n3.Json()["choices"].size(), 3u);
  EXPECT_EQ(n3.Json()["choices"][0]["text"], Text(j));
  EXPECT_EQ(n3.Json()["choices"][2]["index"], 2);
  EXPECT_EQ(n3.Json()["usage"]["prompt_tokens"], 4) << "a prompt counts once however many choices";
  EXPECT_EQ(n3.Json()["usage"]["completion_tokens"], 24);
}

TEST(HttpApiTest, StreamEndsWithUsageThenDone) {
  auto server = StartHttp();
  ASSERT_NE(server, nullptr);
  const std::string common = R"("prompt": "Hello", "max_tokens": 12, "ignore_eos": true, "logprobs": 2, "temperature": 0)";
  const Reply unary = Post(*server, "/v1/completions", "{" + common + "}");
  ASSERT_EQ(unary.status, 200) << unary.body;
  const Reply stream = Post(*server, "/v1/completions",
                            "{" + common + R"(, "stream": true, "stream_options": {"include_usage": true}})");
  ASSERT_EQ(stream.status, 200) << stream.body;
  std::string text;
  std::vector<json> events;
  size_t pos = 0, tokens = 0;
  bool done = false;
  while ((pos = stream.body.find("data: ", pos)) != std::string::npos) {
    const size_t end = stream.body.find("\n\n", pos);
    ASSERT_NE(end, std::string::npos);
    const std::string data = stream.body.substr(pos + 6, end - pos - 6);
    pos = end;
    ASSERT_FALSE(done) << "nothing may follow [DONE]";
    if (data == "[DONE]") {
      done = true;
      continue;
    }
    json e = json::parse(data);
    for (const json& c : e["choices"]) {
      text += c["text"].get<std::string>();
      if (c["logprobs"].is_object()) tokens += c["logprobs"]["tokens"].size();
    }
    events.push_back(e);
  }
  ASSERT_TRUE(done);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(text, Text(unary.Json()));
  EXPECT_EQ(tokens, 12u);
  EXPECT_TRUE(events.back()["choices"].empty());
  EXPECT_EQ(events.back()["usage"]["completion_tokens"], 12);
  EXPECT_TRUE(events.front()["usage"].is_null());
  EXPECT_EQ(events[events.size() - 2]["choices"][0]["finish_reason"], "length");
  const json lp = unary.Json()["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 12u);
  EXPECT_EQ(lp["top_logprobs"][0].size(), 2u);
  EXPECT_LE(lp["token_logprobs"][0].get<double>(), 0.0);
}

// lm-eval's loglikelihood call: token ids, echo, logprobs, max_tokens 0 or 1, temperature 0.
TEST(HttpApiTest, EchoWithLogprobsScoresThePromptThenTheGeneratedTokens) {
  auto server = StartHttp();
  ASSERT_NE(server, nullptr);
  const std::vector<int> ids = {5, 17, 100, 42, 7, 300, 64};
  const std::string prompt = json(ids).dump();
  const std::string common = R"("echo": true, "logprobs": 2, "temperature": 0, "ignore_eos": true)";
  const Reply only = Post(*server, "/v1/completions", R"({"prompt": )" + prompt + R"(, "max_tokens": 0, )" + common + "}");
  ASSERT_EQ(only.status, 200) << only.body;
  const json c0 = only.Json()["choices"][0];
  EXPECT_EQ(c0["finish_reason"], "length");
  EXPECT_EQ(only.Json()["usage"]["completion_tokens"], 0);
  const json lp = c0["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), ids.size());
  ASSERT_EQ(lp["token_logprobs"].size(), ids.size());
  EXPECT_TRUE(lp["token_logprobs"][0].is_null()) << "the first token has nothing before it";
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  std::string pieces;
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(lp["text_offset"][i], pieces.size());
    pieces += lp["tokens"][i].get<std::string>();
    if (i == 0) continue;
    EXPECT_LE(lp["token_logprobs"][i].get<double>(), 0.0);
    EXPECT_GE(lp["top_logprobs"][i].size(), 1u);
    EXPECT_LE(lp["top_logprobs"][i].size(), 2u);
    double best = -1e30;
    for (const auto& [piece, v] : lp["top_logprobs"][i].items()) best = std::max(best, v.get<double>());
    EXPECT_LE(lp["token_logprobs"][i].get<double>(), best + 1e-6);
  }
  EXPECT_EQ(c0["text"], pieces);

  // max_tokens 1 (what lm-eval sends): the same prompt scores, then the generated token, as
  // without echo.
  const Reply one = Post(*server, "/v1/completions", R"({"prompt": )" + prompt + R"(, "max_tokens": 1, )" + common + "}");
  ASSERT_EQ(one.status, 200) << one.body;
  const json lp1 = one.Json()["choices"][0]["logprobs"];
  ASSERT_EQ(lp1["tokens"].size(), ids.size() + 1);
  for (size_t i = 1; i < ids.size(); ++i) {
    EXPECT_NEAR(lp1["token_logprobs"][i].get<double>(), lp["token_logprobs"][i].get<double>(), 1e-5) << i;
  }
  const Reply plain = Post(*server, "/v1/completions",
                           R"({"prompt": )" + prompt + R"(, "max_tokens": 1, "logprobs": 2, "temperature": 0})");
  ASSERT_EQ(plain.status, 200) << plain.body;
  const json gen = plain.Json()["choices"][0]["logprobs"];
  EXPECT_EQ(lp1["tokens"][ids.size()], gen["tokens"][0]);
  EXPECT_NEAR(lp1["token_logprobs"][ids.size()].get<double>(), gen["token_logprobs"][0].get<double>(), 1e-5);
  EXPECT_EQ(lp1["text_offset"][ids.size()], pieces.size());

  // Streamed: the first chunk starts with the prompt and its logprobs; the pieces add up to
  // the unary response.
  const Reply stream = Post(*server, "/v1/completions",
                            R"({"prompt": )" + prompt + R"(, "max_tokens": 3, "stream": true, )" + common + "}");
  ASSERT_EQ(stream.status, 200) << stream.body;
  const Reply whole = Post(*server, "/v1/completions", R"({"prompt": )" + prompt + R"(, "max_tokens": 3, )" + common + "}");
  ASSERT_EQ(whole.status, 200) << whole.body;
  std::string text;
  json tokens = json::array(), token_logprobs = json::array();
  for (size_t pos = 0; (pos = stream.body.find("data: {", pos)) != std::string::npos;) {
    const size_t end = stream.body.find("\n\n", pos);
    const json e = json::parse(stream.body.substr(pos + 6, end - pos - 6));
    pos = end;
    for (const json& c : e["choices"]) {
      text += c["text"].get<std::string>();
      if (!c["logprobs"].is_object()) continue;
      for (const json& t : c["logprobs"]["tokens"]) tokens.push_back(t);
      for (const json& t : c["logprobs"]["token_logprobs"]) token_logprobs.push_back(t);
    }
  }
  const json w = whole.Json()["choices"][0];
  EXPECT_EQ(text, w["text"]);
  EXPECT_EQ(tokens, w["logprobs"]["tokens"]);
  ASSERT_EQ(token_logprobs.size(), ids.size() + 3);
  EXPECT_TRUE(token_logprobs[0].is_null());
  for (size_t i = 1; i < token_logprobs.size(); ++i) {
    EXPECT_NEAR(token_logprobs[i].get<double>(), w["logprobs"]["token_logprobs"][i].get<double>(), 1e-5) << i;
  }

  // A batch of token-id prompts: each choice scores its own.
  const Reply batch = Post(*server, "/v1/completions",
                           R"({"prompt": [[5, 17, 100], [42, 7]], "max_tokens": 0, )" + common + "}");
  ASSERT_EQ(batch.status, 200) << batch.body;
  ASSERT_EQ(batch.Json()["choices"].size(), 2u);
  EXPECT_EQ(batch.Json()["choices"][0]["logprobs"]["tokens"].size(), 3u);
  EXPECT_EQ(batch.Json()["choices"][1]["logprobs"]["tokens"].size(), 2u);
  EXPECT_NEAR(batch.Json()["choices"][0]["logprobs"]["token_logprobs"][2].get<double>(),
              lp["token_logprobs"][2].get<double>(), 1e-5);
  // max_tokens 0 without echo is still refused, naming the field.
  const Reply zero = Post(*server, "/v1/completions", R"({"prompt": "a", "max_tokens": 0})");
  EXPECT_EQ(zero.status, 400);
  EXPECT_EQ(zero.Json()["error"]["param"], "max_tokens") << zero.body;
}

TEST(HttpApiTest, BadBodiesAre400sAndTheServerKeepsServing) {
  auto server = StartHttp({"--max-receive-message-bytes", "65536"});
  ASSERT_NE(server, nullptr);
  struct Case {
    std::string body;
    int status;
    std::string param;  // "" when none
  };
  const std::vector<Case> cases = {
      {"{", 400, ""},
      {"[1,2]", 400, ""},
      {"", 400, ""},
      {"{\"prompt\": \"\xc3\x28\"}", 400, ""},  // invalid UTF-8
      {R"({"prompt": "a", "temperature": -1})", 400, "temperature"},
      {R"({"prompt": "a", "temperature": "x"})", 400, "temperature"},
      {R"({"prompt": "a", "max_tokens": 1e400})", 400, ""},  // not even JSON's range
      {R"({"prompt": "a", "max_tokens": 100000})", 400, "max_tokens"},
      {R"({"prompt": "a", "max_tokens": 0})", 400, "max_tokens"},
      {R"({"prompt": [1, 99999]})", 400, "prompt[1]"},
      {R"({"prompt": "a", "kv_policy": "bogus"})", 400, "kv_policy"},
      {R"({"prompt": "a", "kv_budget": -3})", 400, "kv_budget"},
      {R"({"prompt": "a", "stop": ["", "x"]})", 400, "stop[0]"},
      {R"({"prompt": "a", "top_p": 2})", 400, "top_p"},
      {R"({"prompt": "a", "echo": true, "logprobs": 21})", 400, "logprobs"},
      {R"({"prompt": "a", "echo": true, "logprobs": -1})", 400, "logprobs"},
      {R"({"n": 2})", 400, "prompt"},
      {"{\"prompt\": \"" + std::string(70000, 'a') + "\"}", 413, ""},
      {std::string(20000, '[') + std::string(20000, ']'), 400, ""},
  };
  for (const Case& c : cases) {
    const Reply r = Post(*server, "/v1/completions", c.body);
    EXPECT_EQ(r.status, c.status) << c.body.substr(0, 60) << " -> " << r.body;
    const json j = r.Json();
    ASSERT_TRUE(j.is_object() && j.contains("error")) << r.body;
    EXPECT_TRUE(j["error"]["message"].is_string());
    if (!c.param.empty()) {
      EXPECT_EQ(j["error"]["param"], c.param) << r.body;
    }
  }
  // Chat on a model without a chat template names messages.
  const Reply chat = Post(*server, "/v1/chat/completions", R"({"messages": [{"role": "user", "content": "hi"}]})");
  EXPECT_EQ(chat.status, 400);
  EXPECT_EQ(chat.Json()["error"]["param"], "messages") << chat.body;
  EXPECT_EQ(Get(*server, "/v2/nothing").status, 404);
  EXPECT_EQ(Get(*server, "/v2/nothing").Json()["error"]["code"], "not_found");
  EXPECT_EQ(Post(*server, "/v1/completions", R"({"prompt": "ok", "max_tokens": 2})").status, 200);
  EXPECT_EQ(Get(*server, "/health").status, 200);
  EXPECT_GE(server->Metric("kvserve_request_rejected_total{reason=\"invalid_argument\"}").value_or(0), 15);
  EXPECT_TRUE(WaitFor([&] { return server->Metric("kvserve_kv_pages_reserved") == 0.0; }, std::chrono::seconds(30)));
}

TEST(HttpApiTest, ApiKeysGuardEverythingButHealth) {
  const std::string dir = RunCommand("mktemp -d | tr -d '\\n'");
  const std::string keys = dir + "/keys";
  std::ofstream(keys) << "# test\nalpha-0123456789abcdef\n";
  auto server = StartHttp({"--api-key-file", keys});
  ASSERT_NE(server, nullptr);
  const std::string body = R"({"prompt": "hi", "max_tokens": 2})";
  for (const std::string& key : {std::string(), std::string("wrong-0123456789abcdef")}) {
    const Reply r = Post(*server, "/v1/completions", body, key);
    EXPECT_EQ(r.status, 401) << r.body;
    EXPECT_EQ(r.Json()["error"]["type"], "authentication_error");
    EXPECT_EQ(r.Json()["error"]["message"], "missing or invalid API key");
  }
  EXPECT_EQ(Post(*server, "/tokenize", R"({"prompt": "hi"})").status, 401);
  EXPECT_EQ(Get(*server, "/v1/models").status, 401);
  EXPECT_EQ(Get(*server, "/health").status, 200);
  EXPECT_EQ(Post(*server, "/v1/completions", body, "alpha-0123456789abcdef").status, 200);
  EXPECT_GE(server->Metric("kvserve_auth_failures_total").value_or(0), 4);
}

TEST(HttpApiTest, TokenizeDetokenizeAndModels) {
  auto server = StartHttp();
  ASSERT_NE(server, nullptr);
  const Reply t = Post(*server, "/tokenize", R"({"prompt": "Hello world", "add_special_tokens": false})");
  ASSERT_EQ(t.status, 200) << t.body;
  const json tokens = t.Json()["tokens"];
  EXPECT_EQ(t.Json()["count"], tokens.size());
  const Reply d = Post(*server, "/detokenize", json{{"tokens", tokens}}.dump());
  ASSERT_EQ(d.status, 200) << d.body;
  EXPECT_EQ(d.Json()["prompt"], "Hello world");
  const Reply bad = Post(*server, "/detokenize", R"({"tokens": [1, 512]})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.Json()["error"]["param"], "tokens[1]");
  const Reply m = Get(*server, "/v1/models");
  ASSERT_EQ(m.status, 200);
  EXPECT_EQ(m.Json()["data"][0]["id"], "random:tiny:0");
  EXPECT_EQ(m.Json()["data"][0]["max_model_len"], 4096);
}

bool PagesFree(const ServerProcess& s) {
  return s.Metric("kvserve_kv_pages_used") == 0.0 && s.Metric("kvserve_kv_pages_reserved") == 0.0 &&
         s.Metric("kvserve_num_requests_running") == 0.0;
}

TEST(HttpApiTest, ClientHangUpAbortsTheRequestAndFreesItsPages) {
  auto server = StartHttp({"--max-context", "60000"});
  ASSERT_NE(server, nullptr);
  const std::string stream = R"({"prompt": "hello", "max_tokens": 50000, "ignore_eos": true, "stream": true})";
  const std::string unary = R"({"prompt": "hello", "max_tokens": 50000, "ignore_eos": true})";
  int cancelled = 0;
  for (const std::string& body : {stream, unary}) {
    const int fd = StartRawPost(server->http_port(), body, body == stream ? 400 : 0);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(WaitFor([&] { return server->Metric("kvserve_kv_pages_used").value_or(0) > 0; },
                        std::chrono::seconds(30)))
        << "a running request holds pages";
    close(fd);
    ++cancelled;
    EXPECT_TRUE(WaitFor([&] { return PagesFree(*server); }, std::chrono::seconds(10))) << body;
    EXPECT_TRUE(WaitFor([&] {
      return server->Metric("kvserve_request_success_total{finish_reason=\"cancelled\"}") == cancelled;
    }, std::chrono::seconds(10)));
  }
  EXPECT_EQ(Get(*server, "/health").status, 200);
}

TEST(HttpApiTest, FullQueueIs429) {
  auto server = StartHttp({"--max-batch-tokens", "1", "--max-waiting", "0", "--max-context", "60000"});
  ASSERT_NE(server, nullptr);
  const int fd = StartRawPost(server->http_port(),
                              R"({"prompt": "hello", "max_tokens": 50000, "ignore_eos": true, "stream": true})", 200);
  ASSERT_GE(fd, 0);
  const Reply r = Post(*server, "/v1/completions", R"({"prompt": "hi", "max_tokens": 2})");
  EXPECT_EQ(r.status, 429) << r.body;
  EXPECT_EQ(r.Json()["error"]["code"], "queue_full");
  EXPECT_EQ(r.retry_after, "1");
  close(fd);
  EXPECT_TRUE(WaitFor([&] { return PagesFree(*server); }, std::chrono::seconds(10)));
  EXPECT_EQ(Post(*server, "/v1/completions", R"({"prompt": "hi", "max_tokens": 2})").status, 200);
}

TEST(HttpApiTest, StalledClientsAreDroppedWhileOthersAreServed) {
  auto server = StartHttp({"--http-timeout", "1", "--http-workers", "4"});
  ASSERT_NE(server, nullptr);
  // More stalled connections than workers: half a request each, then silence.
  std::vector<int> stalled;
  for (int i = 0; i < 16; ++i) {
    const int fd = Connect(server->http_port());
    ASSERT_GE(fd, 0);
    const std::string half = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"pro";
    ASSERT_EQ(write(fd, half.data(), half.size()), static_cast<ssize_t>(half.size()));
    stalled.push_back(fd);
  }
  // Each stalled worker is freed after the 1 s read timeout: a real request gets through.
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(Post(*server, "/v1/completions", R"({"prompt": "hi", "max_tokens": 2})").status, 200);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  for (int fd : stalled) {
    timeval tv{10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char buf[512];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0) {
    }
    EXPECT_EQ(n, 0) << "the server closed the stalled connection";
    close(fd);
  }
  EXPECT_EQ(Get(*server, "/health").status, 200);
}

TEST(HttpApiTest, ManyClientsConnectingAtOnceAreNotHeldBack) {
  // 48 clients connect at the same instant. A listen backlog of 5 (httplib's compiled-in
  // default) drops SYNs that the kernel retries after 1 s; a wide one takes them all at once.
  auto server = StartHttp();
  ASSERT_NE(server, nullptr);
  const double slowest =
      testing::SlowestOfSimultaneousCalls(48, 3, [&] { return Get(*server, "/health").status == 200; });
  EXPECT_LT(slowest, 0.9) << "the slowest of 48 simultaneous /health calls";
}

TEST(HttpApiTest, DrainingServerAnswers503) {
  auto server = StartHttp({"--max-context", "60000", "--drain-timeout", "30"});
  ASSERT_NE(server, nullptr);
  const int fd = StartRawPost(server->http_port(),
                              R"({"prompt": "hello", "max_tokens": 50000, "ignore_eos": true, "stream": true})", 200);
  ASSERT_GE(fd, 0);
  kill(server->pid(), SIGTERM);
  ASSERT_TRUE(WaitFor([&] { return Get(*server, "/health").status == 503; }, std::chrono::seconds(10)));
  const Reply r = Post(*server, "/v1/completions", R"({"prompt": "hi", "max_tokens": 2})");
  EXPECT_EQ(r.status, 503) << r.body;
  close(fd);  // the running call ends: the drain completes and the server exits
  EXPECT_EQ(server->Wait(std::chrono::seconds(30)), 0);
}

// A TLS server (not ServerProcess: its readiness probe speaks plaintext gRPC) with a
// self-signed localhost certificate in dir/s.crt; `extra` flags appended. Killed at scope end.
class TlsServer {
 public:
  TlsServer(const std::string& dir, const std::string& extra) {
    const std::string ports = dir + "/ports";
    const std::string serve = BinaryPath("kvserve") + " serve --model random:tiny --host 127.0.0.1 --port 0" +
                              " --metrics-port -1 --http-port 0 --kv-memory 64M --port-file " + ports +
                              " --tls-cert " + dir + "/s.crt --tls-key " + dir + "/s.key " + extra;
    pid_ = RunCommand("(" + serve + " >" + dir + "/log 2>&1 & echo $!) | tr -d '\\n'");
    WaitFor([&] {
      std::ifstream in(ports);
      for (std::string line; std::getline(in, line);) {
        if (line.rfind("http=", 0) == 0) port_ = std::stoi(line.substr(5));
      }
      return port_ > 0;
    }, std::chrono::seconds(60));
  }
  ~TlsServer() { RunCommand("kill " + pid_); }
  int port() const { return port_; }
  // The signals the server ignores (/proc's SigIgn mask).
  uint64_t IgnoredSignals() const {
    std::ifstream in("/proc/" + pid_ + "/status");
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("SigIgn:", 0) == 0) return std::stoull(line.substr(7), nullptr, 16);
    }
    return 0;
  }

 private:
  std::string pid_;
  int port_ = -1;
};

std::string MakeServerCert() {
  const std::string dir = RunCommand("mktemp -d | tr -d '\\n'");
  const int rc = std::system(("cd " + dir + " && openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost"
                              " -addext subjectAltName=DNS:localhost -keyout s.key -out s.crt >/dev/null 2>&1")
                                 .c_str());
  EXPECT_EQ(rc, 0) << "the openssl CLI is needed";
  return dir;
}

TEST(HttpApiTest, ClientCaRequiresASignedClientCertificate) {
  // A refused handshake closes the socket under OpenSSL's next write: without this the test
  // process itself dies of SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  const std::string dir = MakeServerCert();
  // A CA, and a client certificate it signs.
  ASSERT_EQ(std::system(("cd " + dir + " && openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=ca"
                         " -keyout ca.key -out ca.crt >/dev/null 2>&1 && openssl req -newkey rsa:2048 -nodes"
                         " -subj /CN=client -keyout c.key -out c.csr >/dev/null 2>&1 && openssl x509 -req -in c.csr"
                         " -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -out c.crt >/dev/null 2>&1")
                            .c_str()),
            0);
  TlsServer server(dir, "--tls-client-ca " + dir + "/ca.crt");
  ASSERT_GT(server.port(), 0);
  auto health = [&](httplib::SSLClient& c) {
    c.set_ca_cert_path((dir + "/s.crt").c_str());
    c.enable_server_certificate_verification(true);
    c.set_read_timeout(10, 0);
    httplib::Result r = c.Get("/health");
    return r ? r->status : -1;
  };
  httplib::SSLClient with_cert("localhost", server.port(), dir + "/c.crt", dir + "/c.key");
  EXPECT_TRUE(WaitFor([&] { return health(with_cert) == 200; }, std::chrono::seconds(60)));
  httplib::SSLClient without("localhost", server.port());
  EXPECT_EQ(health(without), -1) << "the handshake fails without a client certificate";
  httplib::SSLClient self_signed("localhost", server.port(), dir + "/s.crt", dir + "/s.key");
  EXPECT_EQ(health(self_signed), -1) << "the handshake fails with a certificate the CA did not sign";
}

TEST(HttpApiTest, TlsFilesServeHttps) {
  const std::string dir = MakeServerCert();
  TlsServer server(dir, "");
  const int port = server.port();
  ASSERT_GT(port, 0);
  httplib::SSLClient c("localhost", port);
  c.set_ca_cert_path((dir + "/s.crt").c_str());
  c.enable_server_certificate_verification(true);
  c.set_read_timeout(60, 0);
  ASSERT_TRUE(WaitFor([&] {
    httplib::Result h = c.Get("/health");
    return h && h->status == 200;
  }, std::chrono::seconds(60)));
  httplib::Result r =
      c.Post("/v1/completions", R"({"prompt": "hi", "max_tokens": 3, "ignore_eos": true})", "application/json");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["usage"]["completion_tokens"], 3);
  // A client hanging up mid-write must not end the server: OpenSSL's write raises SIGPIPE.
  EXPECT_NE(server.IgnoredSignals() & (uint64_t{1} << (SIGPIPE - 1)), 0u) << "SIGPIPE is ignored";
  // Plaintext HTTP to the TLS port gets no answer.
  httplib::Client plain("127.0.0.1", port);
  plain.set_read_timeout(5, 0);
  httplib::Result p = plain.Get("/health");
  EXPECT_TRUE(!p || p->status != 200);
}

}  // namespace
}  // namespace kvserve::testing
