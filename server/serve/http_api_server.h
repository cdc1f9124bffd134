// The OpenAI-compatible HTTP API (`kvserve serve --http-port N`): POST /v1/completions and
// /v1/chat/completions (Server-Sent Events when "stream": true), GET /v1/models, GET /health,
// POST /tokenize and /detokenize (vLLM's shapes). The same process, Engine, validation, API keys,
// TLS files, metrics and drain as the gRPC API.
//
// Served by cpp-httplib (Debian's libcpp-httplib-dev, built with OpenSSL): a bounded pool of
// workers, each holding one connection (a generation holds its worker until it ends), and per
// read and write timeouts, so a client that stalls is dropped and its request aborted.
#pragma once
#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "prometheus/counter.h"
#include "server/serve/api_keys.h"
#include "server/serve/grpc_serve_context.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace kvserve {

struct HttpApiOptions {
  std::string host = "0.0.0.0";
  int port = 0;                    // 0: the OS picks
  int workers = 64;                // connections served at once (--http-workers)
  int io_timeout_seconds = 30;     // per read or write on a connection (--http-timeout)
  int64_t max_body_bytes = 64 << 20;
  std::string tls_cert, tls_key;   // PEM files: HTTPS when set
  std::string tls_client_ca;       // PEM: client certificates required and verified
};

class HttpApiServer {
 public:
  // Binds and starts serving (every generation route answers 503 until set_context).
  // `api_keys` (may be null: no authentication) and `auth_failures` outlive the server.
  static absl::StatusOr<std::unique_ptr<HttpApiServer>> Start(const HttpApiOptions& options, const ApiKeys* api_keys,
                                                               prometheus::Counter* auth_failures);
  ~HttpApiServer();  // stops accepting, lets the workers finish, joins
  HttpApiServer(const HttpApiServer&) = delete;
  HttpApiServer& operator=(const HttpApiServer&) = delete;

  int port() const { return port_; }
  // The loaded model and engine; nullptr while loading (503). Must outlive the server or be
  // reset before it goes.
  void set_context(const ServeContext* ctx) { ctx_.store(ctx); }

 private:
  HttpApiServer() = default;
  void Routes();
  bool Authorized(const httplib::Request& req);
  void Generate(const httplib::Request& req, httplib::Response& res, bool chat);
  void Models(httplib::Response& res);
  void Tokenize(const httplib::Request& req, httplib::Response& res);
  void Detokenize(const httplib::Request& req, httplib::Response& res);
  void Health(httplib::Response& res);

  std::unique_ptr<httplib::Server> http_;
  int port_ = 0;
  std::atomic<const ServeContext*> ctx_{nullptr};
  const ApiKeys* api_keys_ = nullptr;
  prometheus::Counter* auth_failures_ = nullptr;
  std::atomic<int64_t> last_auth_log_{0};
  std::thread thread_;
};

}  // namespace kvserve
