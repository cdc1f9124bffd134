// The metrics port: GET /metrics (prometheus-cpp collectables in the text exposition
// format), GET /health (200 while the process runs) and GET /ready (200 once the model is
// loaded, 503 while loading or draining) for load balancers that do not speak gRPC.
//
// Served by cpp-httplib (Debian's libcpp-httplib-dev), not a parser of our own: a pool of
// worker threads, so a slow or stalled client holds one worker while scrapes go on, and read
// and write timeouts per connection. Not prometheus::Exposer: its civetweb starts workers
// with a fixed ~100 KB stack, which glibc refuses once the binary links the CUDA libraries
// (cuBLASLt alone carries ~94 KB of static TLS); httplib's std::threads take the default.
//
// Optionally HTTPS (mutual TLS with a client CA) and bearer tokens on /metrics; /health and
// /ready stay open so that probes need no credentials.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "prometheus/collectable.h"
#include "server/serve/api_keys.h"

namespace httplib {
class Server;
}

namespace kvserve {

struct MetricsHttpOptions {
  int worker_threads = 8;        // connections served at once
  int io_timeout_seconds = 5;    // per read or write on a connection
  // HTTPS with these PEM files (both or neither); with tls_client_ca as well, a client must
  // present a certificate that CA signed, or the handshake fails (mutual TLS).
  std::string tls_cert, tls_key, tls_client_ca;
  // Set: GET /metrics needs "Authorization: Bearer TOKEN" with one of these tokens, else 401
  // (nothing echoed). Must outlive the server.
  const ApiKeys* api_keys = nullptr;
  std::function<void()> on_auth_failure;  // called per refused scrape (a failure counter)
};

class MetricsHttpServer {
 public:
  // Binds host:port (0 = the OS picks) and starts serving.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& host, int port, std::vector<std::shared_ptr<prometheus::Collectable>> collectables,
      const MetricsHttpOptions& options = {});
  ~MetricsHttpServer();  // stops accepting, finishes the requests in flight, joins
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  int port() const { return port_; }
  // Mirrors grpc.health.v1's SERVING: /ready answers 200 only while true.
  void set_ready(bool ready) { ready_.store(ready); }

 private:
  explicit MetricsHttpServer(std::unique_ptr<httplib::Server> http);
  std::string Exposition() const;

  std::unique_ptr<httplib::Server> http_;
  int port_ = 0;
  std::atomic<bool> ready_{false};
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables_;
  std::thread thread_;
};

}  // namespace kvserve
