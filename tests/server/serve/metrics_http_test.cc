// The metrics port in-process: its three routes and the 404, readiness following set_ready,
// and scrapes that go on while another client stalls mid-request (the endpoint once served
// one connection at a time, so a client sending a byte every few seconds blinded Prometheus),
// and many scrapers connecting at once without a second's wait (a wide listen backlog).
#include "server/serve/metrics_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "gtest/gtest.h"
#include "httplib.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"
#include "absl/strings/str_cat.h"
#include "tests/server/serve/simultaneous_calls.h"

namespace kvserve {
namespace {

class MetricsHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_ = std::make_shared<prometheus::Registry>();
    prometheus::BuildCounter().Name("kvserve_test_total").Help("a test counter").Register(*registry_).Add({}).Increment(3);
    MetricsHttpOptions options;
    options.worker_threads = 4;
    options.io_timeout_seconds = 5;
    auto started = MetricsHttpServer::Start("127.0.0.1", 0, {registry_}, options);
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = *std::move(started);
    ASSERT_GT(server_->port(), 0);
  }
  httplib::Result Get(const std::string& path) {
    httplib::Client client("127.0.0.1", server_->port());
    client.set_connection_timeout(2, 0);
    client.set_read_timeout(2, 0);
    return client.Get(path.c_str());
  }
  // A connection that has sent half a request line and then waits.
  int StalledClient() {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(server_->port()));
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(write(fd, "GET /met", 8), 8);
    return fd;
  }

  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<MetricsHttpServer> server_;
};

TEST_F(MetricsHttpTest, ServesMetricsHealthAndReadiness) {
  auto metrics = Get("/metrics");
  ASSERT_TRUE(metrics) << httplib::to_string(metrics.error());
  EXPECT_EQ(metrics->status, 200);
  EXPECT_NE(metrics->body.find("kvserve_test_total 3"), std::string::npos) << metrics->body;
  EXPECT_NE(metrics->get_header_value("Content-Type").find("version=0.0.4"), std::string::npos);
  EXPECT_EQ(Get("/health")->status, 200);
  EXPECT_EQ(Get("/ready")->status, 503);
  server_->set_ready(true);
  EXPECT_EQ(Get("/ready")->status, 200);
  server_->set_ready(false);  // draining
  EXPECT_EQ(Get("/ready")->status, 503);
  auto missing = Get("/nope");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_NE(missing->body.find("/metrics"), std::string::npos);
}

TEST_F(MetricsHttpTest, StalledClientsDoNotBlockScrapes) {
  const int a = StalledClient(), b = StalledClient();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 3; ++i) {
    auto r = Get("/metrics");
    ASSERT_TRUE(r) << "scrape " << i << " failed beside stalled clients: " << httplib::to_string(r.error());
    EXPECT_EQ(r->status, 200);
  }
  // Each scrape took far less than the 5 s a stalled client may hold its worker.
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 3.0);
  close(a);
  close(b);
}

TEST_F(MetricsHttpTest, ManyScrapersConnectingAtOnceAreNotHeldBack) {
  // 48 clients connect at the same instant. A listen backlog of 5 (Debian's httplib's
  // compiled-in default) drops SYNs that the kernel retries after 1 s; BindHttpServer widens it.
  const double slowest = testing::SlowestOfSimultaneousCalls(48, 3, [&] {
    auto r = Get("/health");
    return r && r->status == 200;
  });
  EXPECT_LT(slowest, 0.9) << "the slowest of 48 simultaneous /health calls";
}

TEST_F(MetricsHttpTest, APortInUseIsAnErrorNamingIt) {
  auto second = MetricsHttpServer::Start("127.0.0.1", server_->port(), {registry_});
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find(absl::StrCat("--metrics-port ", server_->port())), std::string::npos)
      << second.status();
}

}  // namespace
}  // namespace kvserve
