// The /metrics endpoint: a minimal HTTP/1.0 server that serializes prometheus-cpp
// collectables in the text exposition format. It also answers GET /health (200 while the
// process runs) and GET /ready (200 once the model is loaded, 503 while loading or draining)
// for load balancers and health checks that do not speak gRPC.
//
// Why not prometheus::Exposer: its civetweb starts worker threads with a fixed ~100 KB
// stack, and once the kvserve binary links the CUDA libraries (cuBLASLt alone carries
// ~94 KB of static TLS) glibc refuses to create such threads, so the Exposer cannot start.
// Prometheus scrapes once every few seconds; one thread with a default stack serves it.
#pragma once
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "prometheus/collectable.h"

namespace kvserve {

class MetricsHttpServer {
 public:
  // Binds host:port (0 = the OS picks) and starts serving GET /metrics.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& host, int port, std::vector<std::shared_ptr<prometheus::Collectable>> collectables);
  ~MetricsHttpServer();  // stops accepting and joins the thread
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  int port() const { return port_; }
  // Mirrors grpc.health.v1's SERVING: /ready answers 200 only while true.
  void set_ready(bool ready) { ready_.store(ready); }

 private:
  MetricsHttpServer() = default;
  void Loop();
  void Serve(int fd);
  std::string Exposition() const;

  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<bool> ready_{false};
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables_;
  std::thread thread_;
};

}  // namespace kvserve
