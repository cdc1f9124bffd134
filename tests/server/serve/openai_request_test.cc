// The OpenAI body parser and the error mapping, in process (no server): each field lands in
// the GenerateRequest field the gRPC API validates, wrong types and huge numbers are 400s that
// name the field, unsupported fields are refused by name, and statuses map to the HTTP codes
// OpenAI clients act on (429 retried, 400 not).
#include <string>

#include "gtest/gtest.h"
#include "engine/scheduler/request.h"
#include "nlohmann/json.hpp"
#include "server/serve/json_body.h"
#include "server/serve/openai_error.h"
#include "server/serve/openai_request.h"

namespace kvserve {
namespace {

using nlohmann::json;

absl::StatusOr<OpenAiRequest> Completion(const std::string& body, int64_t max_choices = 64) {
  absl::StatusOr<json> j = ParseJsonObject(body);
  if (!j.ok()) return j.status();
  return ParseOpenAiRequest(*j, OpenAiEndpoint::kCompletions, max_choices);
}

absl::StatusOr<OpenAiRequest> Chat(const std::string& body) {
  absl::StatusOr<json> j = ParseJsonObject(body);
  if (!j.ok()) return j.status();
  return ParseOpenAiRequest(*j, OpenAiEndpoint::kChatCompletions, 64);
}

// The error as a client sees it: HTTP status and param.
OpenAiError ErrorOf(const absl::StatusOr<OpenAiRequest>& r) {
  EXPECT_FALSE(r.ok());
  return ToOpenAiError(r.status());
}

TEST(OpenAiRequest, CompletionFieldsMapOntoTheProto) {
  absl::StatusOr<OpenAiRequest> r = Completion(R"({"model": "x", "prompt": "Once", "max_tokens": 7,
      "temperature": 0.5, "top_p": 0.9, "top_k": -1, "min_p": 0.1, "repetition_penalty": 1.1,
      "presence_penalty": 0.2, "frequency_penalty": 0.3, "stop": "\n", "stop_token_ids": [2],
      "ignore_eos": true, "seed": 42, "logprobs": 3, "user": "u1",
      "kv_policy": "snapkv", "kv_budget": 0.25, "kv_compress_at": "chunk", "kv_window": 32,
      "kv_sink_tokens": 40, "kv_evicted_weight": "merge"})");
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::GenerateRequest& p = r->proto;
  ASSERT_EQ(p.prompts_size(), 1);
  EXPECT_EQ(p.prompts(0).text(), "Once");
  EXPECT_EQ(p.stopping().max_new_tokens(), 7u);
  EXPECT_FLOAT_EQ(p.sampling().temperature(), 0.5f);
  EXPECT_FLOAT_EQ(p.sampling().top_p(), 0.9f);
  EXPECT_EQ(p.sampling().top_k(), 0);  // vLLM's -1 is off
  EXPECT_FLOAT_EQ(p.sampling().min_p(), 0.1f);
  EXPECT_FLOAT_EQ(p.sampling().repetition_penalty(), 1.1f);
  EXPECT_FLOAT_EQ(p.sampling().presence_penalty(), 0.2f);
  EXPECT_FLOAT_EQ(p.sampling().frequency_penalty(), 0.3f);
  ASSERT_EQ(p.stopping().stop_sequences_size(), 1);
  EXPECT_EQ(p.stopping().stop_sequences(0), "\n");
  ASSERT_EQ(p.stopping().stop_token_ids_size(), 1);
  EXPECT_TRUE(p.stopping().ignore_eos());
  EXPECT_EQ(r->seed, 42u);
  EXPECT_EQ(r->top_logprobs, 3);
  EXPECT_EQ(p.logprobs().top_logprobs(), 3u);
  EXPECT_EQ(p.kv().policy(), "snapkv");
  EXPECT_DOUBLE_EQ(p.kv().budget(), 0.25);
  EXPECT_EQ(p.kv().compress_at(), "chunk");
  EXPECT_EQ(p.kv().window(), 32);
  EXPECT_EQ(p.kv().sink_tokens(), 40);
  EXPECT_EQ(p.kv().evicted_weight(), "merge");
  EXPECT_FALSE(r->stream);
}

TEST(OpenAiRequest, LogprobsZeroStillAsksTheEngineForTheTokensOwn) {
  absl::StatusOr<OpenAiRequest> r = Completion(R"({"prompt": "a", "logprobs": 0})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->top_logprobs, 0);
  EXPECT_EQ(r->proto.logprobs().top_logprobs(), 1u);
  absl::StatusOr<OpenAiRequest> none = Completion(R"({"prompt": "a"})");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->top_logprobs, -1);
  EXPECT_EQ(none->proto.logprobs().top_logprobs(), 0u);
}

TEST(OpenAiRequest, UnsetTemperatureIsOpenAisOneNotGreedy) {
  absl::StatusOr<OpenAiRequest> r = Completion(R"({"prompt": "a"})");
  ASSERT_TRUE(r.ok());
  EXPECT_FLOAT_EQ(r->proto.sampling().temperature(), 1.0f);
  EXPECT_FALSE(r->seed.has_value());  // the server draws one per call
  absl::StatusOr<OpenAiRequest> greedy = Completion(R"({"prompt": "a", "temperature": 0})");
  ASSERT_TRUE(greedy.ok());
  EXPECT_FLOAT_EQ(greedy->proto.sampling().temperature(), 0.0f);
}

TEST(OpenAiRequest, PromptForms) {
  absl::StatusOr<OpenAiRequest> list = Completion(R"({"prompt": ["a", "b"], "n": 3})");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->prompts, 2);
  EXPECT_EQ(list->n, 3);
  EXPECT_EQ(list->proto.prompts_size(), 2);  // each once; the server runs each n times
  absl::StatusOr<OpenAiRequest> ids = Completion(R"({"prompt": [1, 2, 3]})");
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(ids->proto.prompts(0).token_ids_size(), 3);
  absl::StatusOr<OpenAiRequest> nested = Completion(R"({"prompt": [[1, 2], [3]]})");
  ASSERT_TRUE(nested.ok()) << nested.status();
  EXPECT_EQ(nested->proto.prompts_size(), 2);
  EXPECT_EQ(nested->proto.prompts(1).token_ids(0), 3);
  EXPECT_EQ(ErrorOf(Completion(R"({"prompt": [1, "x"]})")).param, "prompt[1]");
  EXPECT_EQ(ErrorOf(Completion(R"({"prompt": {"a": 1}})")).param, "prompt");
  EXPECT_EQ(ErrorOf(Completion(R"({"max_tokens": 5})")).param, "prompt");
}

TEST(OpenAiRequest, ChoicesAreBoundedByMaxPromptsPerCall) {
  const OpenAiError e = ErrorOf(Completion(R"({"prompt": ["a", "b"], "n": 5})", 8));
  EXPECT_EQ(e.http_status, 400);
  EXPECT_NE(e.message.find("--max-prompts-per-call"), std::string::npos) << e.message;
}

TEST(OpenAiRequest, WrongTypesAndHugeNumbersName400s) {
  struct Case {
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {R"({"prompt": "a", "temperature": "hot"})", "temperature"},
      {R"({"prompt": "a", "max_tokens": 1e300})", "max_tokens"},
      {R"({"prompt": "a", "max_tokens": 2.5})", "max_tokens"},
      {R"({"prompt": "a", "max_tokens": -1})", "max_tokens"},
      {R"({"prompt": "a", "max_tokens": 99999999999999999999999})", "max_tokens"},
      {R"({"prompt": "a", "n": 0})", "n"},
      {R"({"prompt": "a", "n": true})", "n"},
      {R"({"prompt": "a", "seed": 18446744073709551616})", "seed"},
      {R"({"prompt": "a", "stop": [1]})", "stop[0]"},
      {R"({"prompt": "a", "stream": "yes"})", "stream"},
      {R"({"prompt": "a", "logprobs": 21})", "logprobs"},
      {R"({"prompt": "a", "kv_budget": "lots"})", "kv_budget"},
      {R"({"prompt": "a", "kv_layer_budgets": [1, 2.5]})", "kv_layer_budgets[1]"},
      {R"({"prompt": "a", "stop_token_ids": [1e12]})", "stop_token_ids[0]"},
      {R"({"prompt": [1, 5000000000]})", "prompt[1]"},
  };
  for (const Case& c : cases) {
    const OpenAiError e = ErrorOf(Completion(c.body));
    EXPECT_EQ(e.http_status, 400) << c.body;
    EXPECT_EQ(e.type, "invalid_request_error") << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << " -> " << e.message;
  }
}

TEST(OpenAiRequest, BadJsonIsA400NeverAThrow) {
  for (const std::string& body : {std::string("{"), std::string("[1, 2]"), std::string("null"), std::string(""),
                                 std::string("{\"prompt\": \"\xff\xfe\"}"), std::string(100000, '['),
                                  std::string("{\"max_tokens\": 1e400}")}) {
    absl::StatusOr<json> j = ParseJsonObject(body);
    ASSERT_FALSE(j.ok()) << body.substr(0, 40);
    EXPECT_EQ(ToOpenAiError(j.status()).http_status, 400);
  }
}

TEST(OpenAiRequest, DeeplyNestedValuesAreRefusedWithoutRecursion) {
  // Quoting the bad value must not dump it: dump() recurses once per level.
  const int depth = 200000;
  const std::string nested = std::string(depth, '[') + std::string(depth, ']');
  for (const std::string& body : {"{\"prompt\": [" + nested + "]}", "{\"prompt\": \"a\", \"temperature\": " + nested + "}",
                                  "{\"messages\": [{\"role\": \"user\", \"content\": [" + nested + "]}]}"}) {
    absl::StatusOr<json> j = ParseJsonObject(body);
    ASSERT_TRUE(j.ok()) << j.status();
    absl::StatusOr<OpenAiRequest> r = ParseOpenAiRequest(
        *j, body.find("messages") != std::string::npos ? OpenAiEndpoint::kChatCompletions : OpenAiEndpoint::kCompletions,
        64);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(ToOpenAiError(r.status()).http_status, 400) << r.status();
  }
}

TEST(OpenAiRequest, EchoWithLogprobsScoresThePrompt) {
  absl::StatusOr<OpenAiRequest> r = Completion(R"({"prompt": [1, 2, 3], "echo": true, "logprobs": 3, "max_tokens": 1})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->echo);
  EXPECT_TRUE(r->proto.logprobs().has_prompt_logprobs());
  EXPECT_EQ(r->proto.logprobs().prompt_logprobs(), 3u);
  EXPECT_EQ(r->proto.logprobs().top_logprobs(), 3u);
  // max_tokens 0 with echo (lm-eval): the prompt alone, scored, even without logprobs.
  r = Completion(R"({"prompt": "a b", "echo": true, "max_tokens": 0})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->proto.logprobs().has_prompt_logprobs());
  EXPECT_EQ(r->proto.stopping().max_new_tokens(), 0u);
  // Neither echo nor logprobs alone scores it.
  r = Completion(R"({"prompt": "a", "logprobs": 2})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->proto.logprobs().has_prompt_logprobs());
  r = Completion(R"({"prompt": "a", "echo": true})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->proto.logprobs().has_prompt_logprobs());
}

TEST(OpenAiRequest, UnsupportedFieldsAreRefusedByName) {
  struct Case {
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {R"({"prompt": "a", "suffix": "z"})", "suffix"},
      {R"({"prompt": "a", "logit_bias": {"5": 10}})", "logit_bias"},
      {R"({"prompt": "a", "best_of": 3})", "best_of"},
  };
  for (const Case& c : cases) {
    const OpenAiError e = ErrorOf(Completion(c.body));
    EXPECT_EQ(e.http_status, 400) << c.body;
    EXPECT_EQ(e.code, "unsupported_parameter") << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << " -> " << e.message;
  }
  // Their neutral values are accepted: clients send them by default.
  EXPECT_TRUE(Completion(R"({"prompt": "a", "suffix": "", "logit_bias": {}, "best_of": 1, "echo": false})").ok());
  EXPECT_EQ(ErrorOf(Chat(R"({"messages": [{"role": "user", "content": "a"}], "tools": [{"type": "function"}]})")).param,
            "tools");
  EXPECT_EQ(ErrorOf(Chat(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})")).param,
            "messages[0].content[0].type");
}

TEST(OpenAiRequest, ChatMessages) {
  absl::StatusOr<OpenAiRequest> r = Chat(R"({"messages": [
      {"role": "developer", "content": "be brief"},
      {"role": "user", "content": [{"type": "text", "text": "hi "}, {"type": "text", "text": "there"}]}],
      "max_completion_tokens": 9, "max_tokens": 3, "logprobs": true, "top_logprobs": 2,
      "stream": true, "stream_options": {"include_usage": true}})");
  ASSERT_TRUE(r.ok()) << r.status();
  const v1::Prompt& p = r->proto.prompts(0);
  ASSERT_EQ(p.messages_size(), 2);
  EXPECT_EQ(p.messages(0).role(), "system");
  EXPECT_EQ(p.messages(1).content(), "hi there");
  EXPECT_EQ(r->proto.stopping().max_new_tokens(), 9u);  // max_completion_tokens wins
  EXPECT_EQ(r->max_tokens_field, "max_completion_tokens");
  EXPECT_EQ(r->top_logprobs, 2);
  EXPECT_TRUE(r->stream);
  EXPECT_TRUE(r->include_usage);
  EXPECT_EQ(ErrorOf(Chat(R"({"messages": []})")).param, "messages");
  EXPECT_EQ(ErrorOf(Chat(R"({"messages": [{"content": "x"}]})")).param, "messages[0].role");
  EXPECT_EQ(ErrorOf(Chat(R"({"messages": [{"role": "user", "content": "a"}], "top_logprobs": 2})")).param,
            "top_logprobs");
  EXPECT_EQ(ErrorOf(Chat(R"({"messages": [{"role": "user", "content": "a"}], "stream_options": {}})")).param,
            "stream_options");
}

TEST(OpenAiError, StatusCodesMapToHttp) {
  EXPECT_EQ(ToOpenAiError(absl::InvalidArgumentError("temperature must be >= 0")).http_status, 400);
  EXPECT_EQ(ToOpenAiError(absl::UnauthenticatedError("missing or invalid API key")).http_status, 401);
  EXPECT_EQ(ToOpenAiError(absl::UnavailableError("draining")).http_status, 503);
  // Backpressure is retryable (429); a request the pool can never hold is not.
  const OpenAiError full = ToOpenAiError(QueueFullError("the waiting queue is full"));
  EXPECT_EQ(full.http_status, 429);
  EXPECT_EQ(full.code, "queue_full");
  EXPECT_EQ(ToOpenAiError(absl::ResourceExhaustedError("needs 900 pages, the pool has 64")).http_status, 400);
  EXPECT_EQ(ToOpenAiError(absl::InternalError("step failed")).http_status, 500);
  EXPECT_EQ(ToOpenAiError(absl::InvalidArgumentError("the body is not valid JSON")).param, "");
}

TEST(OpenAiError, GrpcFieldNamesAreRenamedToTheBodys) {
  absl::StatusOr<OpenAiRequest> chat = Chat(R"({"messages": [{"role": "user", "content": "a"}],
                                               "max_completion_tokens": 5})");
  ASSERT_TRUE(chat.ok());
  absl::StatusOr<OpenAiRequest> completion = Completion(R"({"prompt": "a"})");
  ASSERT_TRUE(completion.ok());
  struct Case {
    const OpenAiRequest* request;
    const char* grpc_message;
    const char* param;
    const char* message_start;
  };
  const Case cases[] = {
      {&*completion, "stopping.max_new_tokens = 9000 is above the limit 512", "max_tokens", "max_tokens = 9000"},
      {&*chat, "stopping.max_new_tokens must be >= 1, got 0", "max_completion_tokens", "max_completion_tokens must"},
      {&*completion, "sampling: top_p must be in (0, 1], got 2", "top_p", "top_p must"},
      {&*completion, "kv.policy 'x' is unknown; use one of full, snapkv", "kv_policy", "kv_policy 'x'"},
      {&*completion, "prompts[0].token_ids[1] = 9999 is outside the vocabulary [0, 512)", "prompt[1]", "prompt[1] = 9999"},
      {&*completion, "prompts[0] has 9000 tokens; the limit is 8191", "prompt", "prompt has 9000"},
      {&*chat, "prompts[0].messages[1].role 'tool' is unknown", "messages[1].role", "messages[1].role"},
      {&*completion, "stopping.stop_sequences[0] is empty", "stop[0]", "stop[0] is empty"},
  };
  for (const Case& c : cases) {
    const OpenAiError e = ToOpenAiError(absl::InvalidArgumentError(c.grpc_message), OpenAiFieldRenames(*c.request));
    EXPECT_EQ(e.param, c.param) << c.grpc_message << " -> " << e.message;
    EXPECT_EQ(e.message.rfind(c.message_start, 0), 0u) << e.message;
  }
}

TEST(OpenAiError, BodyIsValidJsonAndCapped) {
  OpenAiError e = ToOpenAiError(absl::InvalidArgumentError("kv_policy '" + std::string(100000, 'x') + "\xff' is unknown"));
  const std::string body = OpenAiErrorBody(e);
  EXPECT_LT(body.size(), 2000u);
  json j = json::parse(body);
  EXPECT_EQ(j["error"]["param"], "kv_policy");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_TRUE(j["error"]["message"].is_string());
  EXPECT_TRUE(json::parse(OpenAiErrorBody(ToOpenAiError(absl::InternalError("x"))))["error"]["param"].is_null());
}

}  // namespace
}  // namespace kvserve
