// MetricsHttpServer: accept loop on one thread; each connection reads one request (with a
// receive timeout, so a stalled client cannot hold the endpoint) and gets one response.
#include "server/serve/metrics_http.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "prometheus/text_serializer.h"

namespace kvserve {

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& host, int port, std::vector<std::shared_ptr<prometheus::Collectable>> collectables) {
  auto s = std::unique_ptr<MetricsHttpServer>(new MetricsHttpServer());
  s->collectables_ = std::move(collectables);
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  const std::string port_str = std::to_string(port);
  if (getaddrinfo(host.c_str(), port_str.c_str(), &hints, &res) != 0 || res == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("--metrics-host '", host, "' does not resolve"));
  }
  const int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  const bool bound = fd >= 0 && bind(fd, res->ai_addr, res->ai_addrlen) == 0 && listen(fd, 64) == 0;
  freeaddrinfo(res);
  if (!bound) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) close(fd);
    return absl::UnavailableError(absl::StrCat("--metrics-port ", port, " on ", host, ": ", why));
  }
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  s->port_ = ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                                              : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  s->listen_fd_ = fd;
  s->thread_ = std::thread([p = s.get()] { p->Loop(); });
  return s;
}

MetricsHttpServer::~MetricsHttpServer() {
  stop_ = true;
  shutdown(listen_fd_, SHUT_RDWR);  // wakes the blocked accept()
  if (thread_.joinable()) thread_.join();
  close(listen_fd_);
}

void MetricsHttpServer::Loop() {
  while (!stop_) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (stop_) return;
      continue;
    }
    Serve(fd);
    close(fd);
  }
}

void MetricsHttpServer::Serve(int fd) {
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  std::string request;
  char buf[4096];
  // Read the request head; the body (there is none for GET) is ignored.
  while (request.find("\r\n\r\n") == std::string::npos && request.size() < 65536) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    request.append(buf, n);
  }
  const auto is = [&](const char* path) {
    const std::string p = absl::StrCat("GET ", path);
    return request.rfind(p + " ", 0) == 0 || request.rfind(p + "?", 0) == 0;
  };
  std::string status = "200 OK", body;
  if (is("/metrics")) {
    body = Exposition();
  } else if (is("/health")) {
    body = "ok\n";
  } else if (is("/ready")) {
    const bool ready = ready_.load();
    status = ready ? "200 OK" : "503 Service Unavailable";
    body = ready ? "ready\n" : "not ready: loading or draining\n";
  } else {
    status = "404 Not Found", body = "not found: GET /metrics, /health or /ready\n";
  }
  const std::string response =
      absl::StrCat("HTTP/1.0 ", status, "\r\n",
                   "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: ", body.size(),
                   "\r\nConnection: close\r\n\r\n", body);
  for (size_t off = 0; off < response.size();) {
    const ssize_t n = write(fd, response.data() + off, response.size() - off);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
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
