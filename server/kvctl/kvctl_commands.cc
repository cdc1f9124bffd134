// `kvctl tokenize`, `kvctl info` and `kvctl health`.
#include <chrono>
#include <cstdio>
#include <thread>

#include "absl/strings/str_join.h"
#include "google/protobuf/text_format.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "kvserve/v1/generation.grpc.pb.h"
#include "server/kvctl/kvctl_channel.h"
#include "server/kvctl/kvctl_commands.h"

namespace kvserve::kvctl {

int RunTokenize(int argc, char** argv) {
  static const char kUsage[] = "kvctl tokenize --text TEXT [--add-special-tokens] [--pieces]\n";
  absl::StatusOr<CliArgs> args = ParseWithConnection(argc, argv, {"text"}, {"add-special-tokens", "pieces"}, kUsage);
  if (!args.ok()) return ReportError(args.status());
  if (args->help()) return 0;
  if (!args->Has("text")) {
    std::fprintf(stderr, "%s%s", kUsage, kConnectionUsage);
    return 2;
  }
  absl::StatusOr<Connection> conn = Connect(*args);
  if (!conn.ok()) return ReportError(conn.status());
  v1::TokenizeRequest req;
  req.set_text(*args->Get("text"));
  req.set_add_special_tokens(args->Flag("add-special-tokens"));
  v1::TokenizeResponse resp;
  grpc::Status st = v1::Generation::NewStub(conn->channel)->Tokenize(conn->NewContext().get(), req, &resp);
  if (!st.ok()) return ReportRpcError(st);
  std::printf("%s\n", absl::StrJoin(resp.token_ids(), " ").c_str());
  if (args->Flag("pieces")) {
    for (int i = 0; i < resp.pieces_size(); ++i) std::printf("%d\t%s\n", resp.token_ids(i), resp.pieces(i).c_str());
  }
  return 0;
}

int RunInfo(int argc, char** argv) {
  absl::StatusOr<CliArgs> args =
      ParseWithConnection(argc, argv, {}, {}, "kvctl info (the served model and the server's limits)\n");
  if (!args.ok()) return ReportError(args.status());
  if (args->help()) return 0;
  absl::StatusOr<Connection> conn = Connect(*args);
  if (!conn.ok()) return ReportError(conn.status());
  v1::GetModelInfoResponse resp;
  grpc::Status st =
      v1::Generation::NewStub(conn->channel)->GetModelInfo(conn->NewContext().get(), v1::GetModelInfoRequest(), &resp);
  if (!st.ok()) return ReportRpcError(st);
  std::string text;
  google::protobuf::TextFormat::PrintToString(resp, &text);
  std::fputs(text.c_str(), stdout);
  return 0;
}

// Exit 0 when SERVING. --wait SECONDS polls until it is (a server that is still loading
// answers NOT_SERVING; one not yet listening fails to connect).
int RunHealth(int argc, char** argv) {
  absl::StatusOr<CliArgs> args = ParseWithConnection(
      argc, argv, {"service", "wait"}, {},
      "kvctl health [--service NAME (default: the server as a whole)] [--wait SECONDS]\n");
  if (!args.ok()) return ReportError(args.status());
  if (args->help()) return 0;
  absl::StatusOr<double> wait = args->GetDouble("wait", 0);
  if (!wait.ok()) return ReportError(wait.status());
  absl::StatusOr<Connection> conn = Connect(*args);
  if (!conn.ok()) return ReportError(conn.status());
  auto stub = grpc::health::v1::Health::NewStub(conn->channel);
  grpc::health::v1::HealthCheckRequest req;
  req.set_service(args->Get("service").value_or(""));
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(*wait);
  for (;;) {
    grpc::health::v1::HealthCheckResponse resp;
    std::unique_ptr<grpc::ClientContext> ctx = conn->NewContext();
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc::Status st = stub->Check(ctx.get(), req, &resp);
    const bool serving = st.ok() && resp.status() == grpc::health::v1::HealthCheckResponse::SERVING;
    if (serving || std::chrono::steady_clock::now() >= until) {
      if (!st.ok()) return ReportRpcError(st);
      std::printf("%s\n", grpc::health::v1::HealthCheckResponse::ServingStatus_Name(resp.status()).c_str());
      return serving ? 0 : 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

}  // namespace kvserve::kvctl
