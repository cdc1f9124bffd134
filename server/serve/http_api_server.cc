// HttpApiServer: the httplib server, its limits, authentication, and the small routes (health,
// models, tokenize, detokenize). The generation routes are in http_generate_route.cc.
#include "server/serve/http_api_server.h"

#include <algorithm>
#include <chrono>
#include <cstdio>


#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/tokenizer/utf8.h"
#include "httplib.h"
#include "server/serve/grpc_request.h"
#include "server/serve/http_json_reply.h"
#include "server/serve/httplib_listen.h"
#include "server/serve/json_body.h"
#include "server/serve/openai_request.h"

namespace kvserve {

absl::StatusOr<std::unique_ptr<HttpApiServer>> HttpApiServer::Start(const HttpApiOptions& options,
                                                                     const ApiKeys* api_keys,
                                                                     prometheus::Counter* auth_failures) {
  auto s = std::unique_ptr<HttpApiServer>(new HttpApiServer());
  s->api_keys_ = api_keys;
  s->auth_failures_ = auth_failures;
  if (options.tls_cert.empty()) {
    s->http_ = std::make_unique<httplib::Server>();
  } else {
    // The files were checked (CheckTlsKeyPair) by the gRPC set-up that reads the same flags.
    auto ssl = std::make_unique<httplib::SSLServer>(
        options.tls_cert.c_str(), options.tls_key.c_str(),
        options.tls_client_ca.empty() ? nullptr : options.tls_client_ca.c_str());
    if (!ssl->is_valid()) {
      return absl::InvalidArgumentError(absl::StrCat("--http-port: cannot serve TLS with --tls-cert '", options.tls_cert,
                                                     "' and --tls-key '", options.tls_key, "'"));
    }
    s->http_ = std::move(ssl);
  }
  httplib::Server& http = *s->http_;
  const int workers = std::max(1, options.workers);
  http.new_task_queue = [workers] { return new httplib::ThreadPool(static_cast<size_t>(workers)); };
  http.set_read_timeout(options.io_timeout_seconds, 0);
  http.set_write_timeout(options.io_timeout_seconds, 0);
  http.set_keep_alive_timeout(std::min(options.io_timeout_seconds, 5));
  // httplib closes a kept-alive connection after 5 requests by default; a load generator's
  // client would then reconnect every fifth request.
  http.set_keep_alive_max_count(1000);
  http.set_payload_max_length(static_cast<size_t>(options.max_body_bytes));
  http.set_tcp_nodelay(true);  // a stream's small SSE events go out at once
  s->Routes();
  // SO_REUSEADDR only, and a listen backlog wider than Debian's httplib's 5 (docs/PERF.md).
  const int bound = BindHttpServer(http, options.host, options.port);
  if (bound < 0) {
    return absl::UnavailableError(absl::StrCat("--http-port ", options.port, " on --host '", options.host,
                                               "': cannot listen (in use, not a local address, or not permitted)"));
  }
  s->port_ = bound;
  HttpApiServer* self = s.get();
  s->thread_ = std::thread([self] { self->http_->listen_after_bind(); });
  // stop() only ends a server that is already listening: wait for it, so one stopped at once
  // still joins.
  while (!http.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return s;
}

HttpApiServer::~HttpApiServer() {
  http_->stop();
  if (thread_.joinable()) thread_.join();
}

void HttpApiServer::Routes() {
  httplib::Server& http = *http_;
  // Authentication before routing, so no route can forget it; /health stays open for probes,
  // as grpc.health.v1 does.
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (req.path == "/health" || Authorized(req)) return httplib::Server::HandlerResponse::Unhandled;
    ReplyError(res, absl::UnauthenticatedError("missing or invalid API key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) { Generate(req, res, false); });
  http.Post("/v1/chat/completions",
            [this](const httplib::Request& req, httplib::Response& res) { Generate(req, res, true); });
  http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) { Models(res); });
  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) { Health(res); });
  http.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) { Tokenize(req, res); });
  http.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) { Detokenize(req, res); });
  // httplib's own refusals (404, 413 past max_body_bytes, 400 for a malformed request line)
  // get an OpenAI-shaped body too; a route's own error already has one.
  http.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    absl::Status st = absl::InternalError("internal error");
    if (res.status == 404) {
      st = absl::NotFoundError(absl::StrCat(req.method, " ", req.path,
                                            " is not served: POST /v1/completions, /v1/chat/completions, /tokenize, "
                                            "/detokenize; GET /v1/models, /health"));
    } else if (res.status == 413) {
      st = absl::InvalidArgumentError("the body is larger than --max-receive-message-bytes");
    } else if (res.status < 500) {
      st = absl::InvalidArgumentError(absl::StrCat("bad HTTP request (status ", res.status, ")"));
    }
    const int status = res.status;
    ReplyError(res, st);
    res.status = status;  // keep httplib's code (413, 405, ...)
    return httplib::Server::HandlerResponse::Handled;
  }));
  // A handler that throws (it should not: JSON reads never do) answers 500 instead of
  // taking the process down.
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    std::fprintf(stderr, "kvserve serve: HTTP handler failed: %s\n", what.c_str());
    ReplyError(res, absl::InternalError(absl::StrCat("internal error: ", what)));
  });
}

bool HttpApiServer::Authorized(const httplib::Request& req) {
  if (api_keys_ == nullptr || api_keys_->Allows(req.get_header_value("Authorization"))) return true;
  if (auth_failures_ != nullptr) auth_failures_->Increment();
  // At most one line a second, so a client cannot flood the log with bad tokens.
  const int64_t now = absl::ToUnixSeconds(absl::Now());
  int64_t last = last_auth_log_.load();
  if (now > last && last_auth_log_.compare_exchange_strong(last, now)) {
    std::fprintf(stderr, "kvserve serve: rejected an HTTP request without a valid API key from %s\n",
                 req.remote_addr.c_str());
  }
  return false;
}

void HttpApiServer::Health(httplib::Response& res) {
  const ServeContext* ctx = ctx_.load();
  if (ctx == nullptr || ctx->tracker.draining()) {
    ReplyError(res, absl::UnavailableError(ctx == nullptr ? "the model is still loading" : "server is draining"));
    return;
  }
  ReplyJson(res, 200, {{"status", "ok"}});
}

void HttpApiServer::Models(httplib::Response& res) {
  const ServeContext* ctx = ctx_.load();
  if (ctx == nullptr) return ReplyError(res, LoadingError());
  nlohmann::json model{{"id", ServedModelName(*ctx)},
                       {"object", "model"},
                       {"created", absl::ToUnixSeconds(absl::Now())},
                       {"owned_by", "kvserve"},
                       {"max_model_len", ctx->max_context}};
  ReplyJson(res, 200, {{"object", "list"}, {"data", nlohmann::json::array({model})}});
}

// vLLM's /tokenize: {"prompt": TEXT} or {"messages": [...]}, "add_special_tokens" (default
// true) -> {"tokens", "count", "max_model_len"}. The gRPC Tokenize's byte limit applies.
void HttpApiServer::Tokenize(const httplib::Request& req, httplib::Response& res) {
  const ServeContext* ctx = ctx_.load();
  if (ctx == nullptr) return ReplyError(res, LoadingError());
  absl::StatusOr<nlohmann::json> body = ParseJsonObject(req.body);
  if (!body.ok()) return ReplyError(res, body.status());
  JsonBody b(*body);
  std::optional<std::string> prompt = b.String("prompt");
  const bool add_special = b.Bool("add_special_tokens").value_or(true);
  if (!b.ok()) return ReplyError(res, b.status());
  std::string text;
  if (b.Find("messages") != nullptr) {
    if (prompt) return ReplyError(res, absl::InvalidArgumentError("prompt: set prompt or messages, not both"));
    v1::Prompt p;
    if (absl::Status st = ReadOpenAiMessages(*body, &p); !st.ok()) return ReplyError(res, st);
    absl::StatusOr<std::string> rendered = RenderMessages(*ctx, p.messages(), "messages");
    if (!rendered.ok()) return ReplyError(res, rendered.status());
    text = *std::move(rendered);
  } else if (prompt) {
    text = *std::move(prompt);
  } else {
    return ReplyError(res, absl::InvalidArgumentError("prompt is required (or messages)"));
  }
  if (static_cast<int64_t>(text.size()) > ctx->options.max_tokenize_bytes) {
    return ReplyError(res, absl::InvalidArgumentError(absl::StrCat("prompt has ", text.size(), " bytes, the limit is ",
                                                                   ctx->options.max_tokenize_bytes,
                                                                   " (--max-tokenize-bytes)")));
  }
  const std::vector<int32_t> ids =
      ctx->tokenizer.Encode(text, add_special && ctx->tokenizer.add_bos(), /*parse_special=*/true);
  ReplyJson(res, 200, {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", ctx->max_context}});
}

// vLLM's /detokenize: {"tokens": [ids]} -> {"prompt": TEXT}; ids outside the vocabulary are
// a 400 naming the index, as in the gRPC Detokenize.
void HttpApiServer::Detokenize(const httplib::Request& req, httplib::Response& res) {
  const ServeContext* ctx = ctx_.load();
  if (ctx == nullptr) return ReplyError(res, LoadingError());
  absl::StatusOr<nlohmann::json> body = ParseJsonObject(req.body);
  if (!body.ok()) return ReplyError(res, body.status());
  JsonBody b(*body);
  const int64_t vocab = ctx->model.config.vocab_size;
  std::optional<std::vector<int64_t>> tokens = b.Ints("tokens", 0, vocab - 1);
  if (!b.ok()) return ReplyError(res, b.status());
  if (!tokens) return ReplyError(res, absl::InvalidArgumentError("tokens is required"));
  const std::vector<int32_t> ids(tokens->begin(), tokens->end());
  ReplyJson(res, 200, {{"prompt", utf8::Sanitize(ctx->tokenizer.Decode(ids))}});
}

}  // namespace kvserve
