// The TLS files `serve` is given, checked before gRPC sees them (which only said "cannot
// listen on ..."): a key that does not match its certificate, a file that is not PEM, and a
// client CA without a certificate are refused naming the flag. Keys made by the openssl CLI.
#include "server/serve/tls_files.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/server/serve/server_process.h"

namespace kvserve {
namespace {

using testing::BinaryPath;
using testing::RunCommand;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class TlsFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "tls_files_test";
    const std::string make = "mkdir -p " + dir_ + " && cd " + dir_ +
                             " && for n in a b; do openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=localhost"
                             " -keyout $n.key -out $n.crt >/dev/null 2>&1 || exit 1; done";
    ASSERT_EQ(std::system(make.c_str()), 0) << "the openssl CLI is needed";
  }
  std::string dir_;
};

TEST_F(TlsFilesTest, AMismatchedKeyOrANonPemFileIsNamed) {
  const std::string a_crt = Read(dir_ + "/a.crt"), a_key = Read(dir_ + "/a.key"), b_key = Read(dir_ + "/b.key");
  EXPECT_TRUE(CheckTlsKeyPair(a_crt, a_key).ok());
  EXPECT_EQ(CheckTlsKeyPair(a_crt, b_key).message(), "--tls-key does not match the certificate in --tls-cert");
  EXPECT_EQ(CheckTlsKeyPair("not pem", a_key).message(), "--tls-cert holds no PEM certificate");
  EXPECT_NE(CheckTlsKeyPair(a_crt, a_crt).message().find("--tls-key holds no PEM private key"), std::string::npos);
  EXPECT_TRUE(CheckTlsCa(a_crt).ok());
  EXPECT_EQ(CheckTlsCa(a_key).message(), "--tls-client-ca holds no PEM certificate");
}

TEST_F(TlsFilesTest, ServeStopsOnAMismatchedKeyNamingIt) {
  const std::string out = RunCommand(BinaryPath("kvserve") + " serve --model random:tiny --port 0 --metrics-port -1" +
                                     " --tls-cert " + dir_ + "/a.crt --tls-key " + dir_ + "/b.key 2>&1");
  EXPECT_NE(out.find("--tls-key does not match the certificate in --tls-cert"), std::string::npos) << out;
}

TEST_F(TlsFilesTest, FailedHandshakesCannotFloodTheLog) {
  // 30 plaintext clients against a TLS port within a second: each handshake fails and gRPC logs
  // it, at most 5 lines a second; the next line after the second turns reports what was dropped.
  const std::string log = dir_ + "/serve.log", ports = dir_ + "/ports";
  const std::string serve = BinaryPath("kvserve") + " serve --model random:tiny --host 127.0.0.1 --port 0" +
                            " --metrics-port -1 --kv-memory 64M --port-file " + ports + " --tls-cert " + dir_ +
                            "/a.crt --tls-key " + dir_ + "/a.key";
  const std::string script =
      "(" + serve + " >" + log + " 2>&1 & echo $! >" + dir_ + "/pid); for i in $(seq 100); do " +
      "grep -q ready " + log + " 2>/dev/null && break; sleep 0.1; done; P=$(grep grpc= " + ports + " | cut -d= -f2); " +
      "K=\"timeout 3 " + BinaryPath("kvctl") + " health --deadline 1 --addr 127.0.0.1:$P\"; " +
      // On a loaded machine the first handshakes can fail before the server logs anything for
      // them: first wait (up to 100 clients) for one logged failure, then flood.
      "for i in $(seq 100); do $K >/dev/null 2>&1; grep -q \"grpc E\" " + log + " && break; done; " +
      "for i in $(seq 30); do $K >/dev/null 2>&1; done; sleep 1.2; $K >/dev/null 2>&1; sleep 0.3; " +
      "kill $(cat " + dir_ + "/pid)";
  ASSERT_NE(std::system(("bash -c '" + script + "'").c_str()), -1);
  const std::string text = Read(log);
  size_t grpc_lines = 0;
  for (size_t at = text.find("grpc E"); at != std::string::npos; at = text.find("grpc E", at + 1)) ++grpc_lines;
  EXPECT_GT(grpc_lines, 0u) << text;   // failures are still reported...
  EXPECT_LT(grpc_lines, 30u) << text;  // ...but not one line per bad connection
  EXPECT_NE(text.find("more log lines dropped"), std::string::npos) << text;
}

}  // namespace
}  // namespace kvserve
