// MetricsHttpServer over httplib::Server (httplib::SSLServer for HTTPS): three GET routes, a
// 404 naming them for anything else, a fixed pool of workers, per-connection timeouts, and
// the bearer-token check on /metrics.
#include "server/serve/metrics_http.h"

#include <algorithm>
#include <chrono>


#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "prometheus/text_serializer.h"
#include "server/serve/httplib_listen.h"

namespace kvserve {
namespace {

constexpr char kTextFormat[] = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace

MetricsHttpServer::MetricsHttpServer(std::unique_ptr<httplib::Server> http) : http_(std::move(http)) {}

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& host, int port, std::vector<std::shared_ptr<prometheus::Collectable>> collectables,
    const MetricsHttpOptions& options) {
  std::unique_ptr<httplib::Server> server;
  if (!options.tls_cert.empty() || !options.tls_key.empty()) {
    auto tls = std::make_unique<httplib::SSLServer>(
        options.tls_cert.c_str(), options.tls_key.c_str(),
        options.tls_client_ca.empty() ? nullptr : options.tls_client_ca.c_str());
    if (!tls->is_valid()) {
      return absl::InvalidArgumentError(
          "--metrics-tls: the metrics port cannot use --tls-cert/--tls-key (or --tls-client-ca)");
    }
    server = std::move(tls);
  } else {
    server = std::make_unique<httplib::Server>();
  }
  auto s = std::unique_ptr<MetricsHttpServer>(new MetricsHttpServer(std::move(server)));
  s->collectables_ = std::move(collectables);
  httplib::Server& http = *s->http_;
  const int workers = std::max(1, options.worker_threads);
  http.new_task_queue = [workers] { return new httplib::ThreadPool(static_cast<size_t>(workers)); };
  http.set_read_timeout(options.io_timeout_seconds, 0);
  http.set_write_timeout(options.io_timeout_seconds, 0);
  http.set_keep_alive_timeout(options.io_timeout_seconds);
  if (options.api_keys != nullptr) {
    // Before routing, so an unknown path without a token learns nothing either.
    http.set_pre_routing_handler([keys = options.api_keys, failed = options.on_auth_failure](
                                     const httplib::Request& req, httplib::Response& res) {
      if (req.path == "/health" || req.path == "/ready") return httplib::Server::HandlerResponse::Unhandled;
      if (keys->Allows(req.get_header_value("Authorization"))) return httplib::Server::HandlerResponse::Unhandled;
      if (failed) failed();
      res.status = 401;
      res.set_header("WWW-Authenticate", "Bearer");
      res.set_content("missing or invalid bearer token\n", kTextFormat);
      return httplib::Server::HandlerResponse::Handled;
    });
  }
  MetricsHttpServer* self = s.get();
  http.Get("/metrics", [self](const httplib::Request&, httplib::Response& res) {
    res.set_content(self->Exposition(), kTextFormat);
  });
  http.Get("/health", [](const httplib::Request&, httplib::Response& res) { res.set_content("ok\n", kTextFormat); });
  http.Get("/ready", [self](const httplib::Request&, httplib::Response& res) {
    const bool ready = self->ready_.load();
    res.status = ready ? 200 : 503;
    res.set_content(ready ? "ready\n" : "not ready: loading or draining\n", kTextFormat);
  });
  http.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.status == 404) res.set_content("not found: GET /metrics, /health or /ready\n", kTextFormat);
  });
  // SO_REUSEADDR only (no silent second server splitting the scrapes), and a listen backlog
  // wider than Debian's httplib's 5, so many scrapers connecting at once are not held back.
  const int bound = BindHttpServer(http, host, port);
  if (bound < 0) {
    return absl::UnavailableError(
        absl::StrCat("--metrics-port ", port, " on --metrics-host '", host,
                     "': cannot listen (in use, not a local address, or not permitted)"));
  }
  s->port_ = bound;
  s->thread_ = std::thread([self] { self->http_->listen_after_bind(); });
  // stop() only ends a server that is already listening: wait for it, so a server stopped at
  // once still joins.
  while (!http.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return s;
}

MetricsHttpServer::~MetricsHttpServer() {
  http_->stop();
  if (thread_.joinable()) thread_.join();
}

std::string MetricsHttpServer::Exposition() const {
  std::vector<prometheus::MetricFamily> families;
  for (const auto& c : collectables_) {
    std::vector<prometheus::MetricFamily> f = c->Collect();
    families.insert(families.end(), std::make_move_iterator(f.begin()), std::make_move_iterator(f.end()));
  }
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace kvserve
