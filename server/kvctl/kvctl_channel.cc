// Channel set-up for kvctl: plaintext by default, TLS with an optional CA, client
// certificate and server-name override; receive limits large enough for 128K-token answers.
#include "server/kvctl/kvctl_channel.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kvserve::kvctl {

const std::vector<std::string>& ConnectionFlags() {
  static const std::vector<std::string> f = {"addr",    "deadline", "tls-ca",         "tls-cert",
                                             "tls-key", "tls-server-name", "api-key-file"};
  return f;
}

const std::vector<std::string>& ConnectionBoolFlags() {
  static const std::vector<std::string> f = {"tls"};
  return f;
}

const char kConnectionUsage[] =
    "connection: [--addr HOST:PORT=localhost:50051] [--deadline SECONDS (0: none)=600]\n"
    "  [--tls] [--tls-ca PEM] [--tls-cert PEM --tls-key PEM] [--tls-server-name NAME]\n"
    "  [--api-key-file F (its first token; else $KVSERVE_API_KEY) sent as authorization: Bearer]\n";

namespace {

absl::StatusOr<std::string> ReadFile(const std::string& flag, const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("--", flag, " '", path, "' cannot be read"));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

std::unique_ptr<grpc::ClientContext> Connection::NewContext() const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  if (deadline_seconds > 0) {
    ctx->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::microseconds(static_cast<int64_t>(deadline_seconds * 1e6)));
  }
  if (!api_key.empty()) ctx->AddMetadata("authorization", absl::StrCat("Bearer ", api_key));
  return ctx;
}

absl::StatusOr<Connection> Connect(const CliArgs& args) {
  Connection c;
  absl::StatusOr<double> deadline = args.GetDouble("deadline", 600);
  if (!deadline.ok()) return deadline.status();
  if (!(*deadline >= 0)) return absl::InvalidArgumentError(absl::StrCat("--deadline must be >= 0, got ", *deadline));
  c.deadline_seconds = *deadline;
  if (auto file = args.Get("api-key-file")) {
    absl::StatusOr<std::string> keys = ReadFile("api-key-file", *file);
    if (!keys.ok()) return keys.status();
    for (absl::string_view line : absl::StrSplit(*keys, '\n')) {
      line = absl::StripAsciiWhitespace(line);
      if (!line.empty() && line.front() != '#') {
        c.api_key = std::string(line.data(), line.size());
        break;
      }
    }
    if (c.api_key.empty()) return absl::InvalidArgumentError(absl::StrCat("--api-key-file '", *file, "' holds no token"));
  } else if (const char* env = std::getenv("KVSERVE_API_KEY"); env != nullptr) {
    c.api_key = env;
  }
  const std::string addr = args.Get("addr").value_or("localhost:50051");
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  grpc::ChannelArguments ch;
  ch.SetMaxReceiveMessageSize(-1);  // unlimited: a 128K-token answer with ids and text
  ch.SetMaxSendMessageSize(-1);
  const bool tls = args.Flag("tls") || args.Has("tls-ca") || args.Has("tls-cert");
  if (tls) {
    grpc::SslCredentialsOptions ssl;
    if (auto ca = args.Get("tls-ca")) {
      absl::StatusOr<std::string> pem = ReadFile("tls-ca", *ca);
      if (!pem.ok()) return pem.status();
      ssl.pem_root_certs = *pem;
    }
    if (args.Has("tls-cert") != args.Has("tls-key")) {
      return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
    }
    if (auto cert = args.Get("tls-cert")) {
      absl::StatusOr<std::string> pem = ReadFile("tls-cert", *cert);
      absl::StatusOr<std::string> key = ReadFile("tls-key", *args.Get("tls-key"));
      if (!pem.ok()) return pem.status();
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *pem;
      ssl.pem_private_key = *key;
    }
    creds = grpc::SslCredentials(ssl);
    if (auto name = args.Get("tls-server-name")) ch.SetSslTargetNameOverride(*name);
  }
  c.channel = grpc::CreateCustomChannel(addr, creds, ch);
  return c;
}

int ReportRpcError(const grpc::Status& st) {
  std::fprintf(stderr, "kvctl: %s: %s\n", absl::StatusCodeToString(static_cast<absl::StatusCode>(st.error_code())).c_str(),
               st.error_message().c_str());
  return 1;
}

int ReportError(const absl::Status& st) {
  std::fprintf(stderr, "kvctl: %s\n", std::string(st.message()).c_str());
  return 1;
}

}  // namespace kvserve::kvctl
