// The metrics port's optional credentials: bearer tokens on /metrics (probes stay open, a
// refusal is counted and echoes nothing) and HTTPS with mutual TLS (a client certificate the
// CA signed is required; a plaintext client, a client without a certificate or with one from
// another CA gets nothing).
#include <cstdlib>
#include <string>

#include "gtest/gtest.h"
#include "httplib.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"
#include "server/serve/api_keys.h"
#include "server/serve/metrics_http.h"

namespace kvserve {
namespace {

constexpr char kToken[] = "scraper-0123456789abcdef";

class MetricsAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_ = std::make_shared<prometheus::Registry>();
    prometheus::BuildCounter().Name("kvserve_test_total").Help("a test counter").Register(*registry_).Add({}).Increment(3);
  }

  // A CA, a server certificate for 127.0.0.1 it signed, a client certificate it signed, and a
  // client certificate from a second CA.
  void MakeCertificates() {
    dir_ = ::testing::TempDir() + "metrics_auth_test";
    const std::string sign =
        " -days 2 -sha256 -out $n.crt -extfile ext.cnf >/dev/null 2>&1 || exit 1; done";
    const std::string make =
        "rm -rf " + dir_ + " && mkdir -p " + dir_ + " && cd " + dir_ +
        " && printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > ext.cnf"
        " && for ca in ca other_ca; do openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=$ca"
        " -keyout $ca.key -out $ca.crt >/dev/null 2>&1 || exit 1; done"
        " && for n in server client rogue; do ca=ca; [ $n = rogue ] && ca=other_ca;"
        " openssl req -newkey rsa:2048 -nodes -subj /CN=$n -keyout $n.key -out $n.csr >/dev/null 2>&1 || exit 1;"
        " openssl x509 -req -in $n.csr -CA $ca.crt -CAkey $ca.key -CAcreateserial" + sign;
    ASSERT_EQ(std::system(make.c_str()), 0) << "the openssl CLI is needed";
  }

  std::unique_ptr<MetricsHttpServer> Start(const MetricsHttpOptions& options) {
    auto started = MetricsHttpServer::Start("127.0.0.1", 0, {registry_}, options);
    EXPECT_TRUE(started.ok()) << started.status();
    return started.ok() ? *std::move(started) : nullptr;
  }

  std::shared_ptr<prometheus::Registry> registry_;
  std::string dir_;
};

TEST_F(MetricsAuthTest, MetricsNeedABearerTokenAndProbesDoNot) {
  const ApiKeys keys = ApiKeys::FromTokens({kToken});
  int refused = 0;
  MetricsHttpOptions options;
  options.api_keys = &keys;
  options.on_auth_failure = [&refused] { ++refused; };
  std::unique_ptr<MetricsHttpServer> server = Start(options);
  ASSERT_NE(server, nullptr);
  server->set_ready(true);
  httplib::Client client("127.0.0.1", server->port());
  client.set_read_timeout(5, 0);

  httplib::Result none = client.Get("/metrics");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  EXPECT_EQ(none->body.find("kvserve_test_total"), std::string::npos);
  httplib::Result wrong = client.Get("/metrics", {{"Authorization", "Bearer scraper-0123456789abcdeX"}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  EXPECT_EQ(wrong->body.find("scraper"), std::string::npos) << "the refusal echoes the token";
  httplib::Result basic = client.Get("/metrics", {{"Authorization", std::string("Basic ") + kToken}});
  ASSERT_TRUE(basic);
  EXPECT_EQ(basic->status, 401);
  EXPECT_EQ(refused, 3);

  httplib::Result right = client.Get("/metrics", {{"Authorization", std::string("Bearer ") + kToken}});
  ASSERT_TRUE(right);
  EXPECT_EQ(right->status, 200);
  EXPECT_NE(right->body.find("kvserve_test_total 3"), std::string::npos) << right->body;
  for (const char* probe : {"/health", "/ready"}) {
    httplib::Result r = client.Get(probe);
    ASSERT_TRUE(r) << probe;
    EXPECT_EQ(r->status, 200) << probe << " must stay open for load balancers";
  }
  EXPECT_EQ(refused, 3);
}

TEST_F(MetricsAuthTest, MutualTlsNeedsAClientCertificateFromTheCa) {
  MakeCertificates();
  if (HasFatalFailure()) return;
  MetricsHttpOptions options;
  options.tls_cert = dir_ + "/server.crt";
  options.tls_key = dir_ + "/server.key";
  options.tls_client_ca = dir_ + "/ca.crt";
  std::unique_ptr<MetricsHttpServer> server = Start(options);
  ASSERT_NE(server, nullptr);
  auto client = [&](const std::string& cert) {
    auto c = cert.empty() ? std::make_unique<httplib::SSLClient>("127.0.0.1", server->port())
                          : std::make_unique<httplib::SSLClient>("127.0.0.1", server->port(), dir_ + "/" + cert + ".crt",
                                                                 dir_ + "/" + cert + ".key");
    c->set_ca_cert_path((dir_ + "/ca.crt").c_str());
    c->enable_server_certificate_verification(true);
    c->set_connection_timeout(5, 0);
    c->set_read_timeout(5, 0);
    return c;
  };

  httplib::Result ok = client("client")->Get("/metrics");
  ASSERT_TRUE(ok) << "a client with a certificate the CA signed: " << httplib::to_string(ok.error());
  EXPECT_EQ(ok->status, 200);
  EXPECT_NE(ok->body.find("kvserve_test_total 3"), std::string::npos);
  EXPECT_FALSE(client("")->Get("/metrics")) << "a client without a certificate got an answer";
  EXPECT_FALSE(client("rogue")->Get("/metrics")) << "a certificate from another CA got an answer";
  httplib::Client plain("127.0.0.1", server->port());
  plain.set_read_timeout(5, 0);
  httplib::Result p = plain.Get("/metrics");
  EXPECT_TRUE(!p || p->body.find("kvserve_test_total") == std::string::npos) << "plain HTTP got the metrics";

  MetricsHttpOptions bad = options;
  bad.tls_key = dir_ + "/client.key";  // not the server certificate's key
  EXPECT_FALSE(MetricsHttpServer::Start("127.0.0.1", 0, {registry_}, bad).ok());
}

}  // namespace
}  // namespace kvserve
