// POST /v1/completions and /v1/chat/completions: body -> OpenAiRequest -> the gRPC path's
// BuildEngineRequests (one validation for both APIs) -> n choices per prompt submitted as
// one HttpGeneration -> the response, written by httplib's chunked content provider from this
// worker. The provider polls the generation and, between polls, whether the client is still
// connected; when it is not (or a write fails or times out) the provider gives up and the
// releaser aborts every choice, so the engine frees its pages at once.
#include <chrono>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "httplib.h"
#include "server/serve/grpc_request.h"
#include "server/serve/http_api_server.h"
#include "server/serve/http_generation.h"
#include "server/serve/http_json_reply.h"
#include "server/serve/json_body.h"
#include "server/serve/openai_request.h"
#include "server/serve/openai_response.h"

namespace kvserve {
namespace {

// How long the writer waits for output before it checks the client again.
constexpr std::chrono::milliseconds kPoll(100);

uint64_t RandomU64() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  return rng();
}

// One call's state, shared by the content provider and its releaser (httplib copies both).
struct HttpCall {
  OpenAiRequest request;
  std::unique_ptr<HttpGeneration> generation;
  std::unique_ptr<OpenAiFormatter> format;  // refers to `request`
  std::vector<ChoiceOutput> whole;          // unary: each choice's output so far
  bool started = false;
};

// Writes what the generation produced since the last call; false ends the response (the
// client is gone or a write failed).
bool Pump(HttpCall& call, httplib::DataSink& sink) {
  if (!sink.is_writable()) return false;
  const bool stream = call.request.stream;
  std::string out;
  if (!call.started) {
    call.started = true;
    if (stream) out = call.format->StreamStart();
  }
  for (ChoiceOutput& piece : call.generation->Take(kPoll)) {
    if (stream) {
      out += call.format->StreamChunk(piece);
    } else {
      call.whole[piece.index].Append(std::move(piece));
    }
  }
  const bool done = call.generation->done();
  if (done) out += stream ? call.format->StreamEnd() : DumpJson(call.format->Unary(call.whole)) + "\n";
  if (!out.empty() && !sink.write(out.data(), out.size())) return false;
  if (done) sink.done();
  return true;
}

}  // namespace

void HttpApiServer::Generate(const httplib::Request& req, httplib::Response& res, bool chat) {
  const ServeContext* ctx = ctx_.load();
  if (ctx == nullptr) return ReplyError(res, LoadingError());
  auto refuse = [&](const absl::Status& st, const FieldRenames& renames = {}) {
    ctx->metrics.ObserveRejected(RejectReason(st));
    ReplyError(res, st, renames);
  };
  absl::StatusOr<nlohmann::json> body = ParseJsonObject(req.body);
  if (!body.ok()) return refuse(body.status());
  const OpenAiEndpoint endpoint = chat ? OpenAiEndpoint::kChatCompletions : OpenAiEndpoint::kCompletions;
  absl::StatusOr<OpenAiRequest> parsed = ParseOpenAiRequest(*body, endpoint, ctx->options.max_prompts_per_call);
  if (!parsed.ok()) return refuse(parsed.status());
  auto call = std::make_shared<HttpCall>();
  call->request = *std::move(parsed);
  const OpenAiRequest& r = call->request;
  absl::StatusOr<std::vector<EngineRequest>> built = BuildEngineRequests(*ctx, r.proto, /*streaming=*/false);
  if (!built.ok()) return refuse(built.status(), OpenAiFieldRenames(r));

  // n choices per prompt, each with its own seed: the given one for the first choice (so a
  // seeded call matches the gRPC API's output), a fresh one per call when none is given.
  const uint64_t seed = r.seed.value_or(RandomU64());
  std::vector<EngineRequest> choices;
  std::vector<int64_t> prompt_tokens;
  std::vector<EchoedPrompt> echo;
  for (int64_t p = 0; p < r.prompts; ++p) {
    const EngineRequest& base = (*built)[p];
    prompt_tokens.push_back(static_cast<int64_t>(base.prompt.size()));
    if (r.echo) {
      const v1::Prompt& given = r.proto.prompts(static_cast<int>(p));
      echo.push_back({given.token_ids_size() > 0 ? ctx->tokenizer.Decode(base.prompt) : given.text(), base.prompt});
    }
    for (int64_t j = 0; j < r.n; ++j) {
      EngineRequest c = base;
      c.sampling.seed = seed + static_cast<uint64_t>(p * r.n + j);
      choices.push_back(std::move(c));
    }
  }
  const int64_t n_choices = static_cast<int64_t>(choices.size());
  absl::StatusOr<std::unique_ptr<HttpGeneration>> gen = HttpGeneration::Start(*ctx, std::move(choices));
  if (!gen.ok()) return ReplyError(res, gen.status());  // Start counted the rejection
  call->generation = *std::move(gen);
  const std::string id = absl::StrFormat("%s-%016x", chat ? "chatcmpl" : "cmpl", RandomU64());
  call->format = std::make_unique<OpenAiFormatter>(r, ctx->tokenizer, ServedModelName(*ctx), id,
                                                   absl::ToUnixSeconds(absl::Now()), std::move(prompt_tokens),
                                                   std::move(echo));
  call->whole.resize(n_choices);
  for (int64_t i = 0; i < n_choices; ++i) call->whole[i].index = i;

  if (r.stream) {
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");  // nginx in front: pass events through
  }
  // Chunked even for the unary body: the provider runs while the request does, so a client
  // that hangs up is noticed and its request aborted.
  res.set_chunked_content_provider(
      r.stream ? "text/event-stream" : "application/json",
      [call](size_t /*offset*/, httplib::DataSink& sink) { return Pump(*call, sink); },
      [call](bool success) {
        if (!success) call->generation->Abort();
        call->generation.reset();  // ends the call for the drain tracker
      });
}

}  // namespace kvserve
