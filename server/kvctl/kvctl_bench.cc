// `kvctl bench`: request overhead. N client threads send the same generate request
// (default: "hello", 1 new token) back to back, unary or streaming; prints requests/s and
// latency percentiles. The figures in docs/PERF.md come from here.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "kvserve/v1/generation.grpc.pb.h"
#include "server/kvctl/kvctl_channel.h"
#include "server/kvctl/kvctl_commands.h"

namespace kvserve::kvctl {
namespace {

// One call; true when it succeeded.
bool Call(v1::Generation::Stub& stub, const Connection& conn, const v1::GenerateRequest& req, bool stream) {
  std::unique_ptr<grpc::ClientContext> ctx = conn.NewContext();
  if (stream) {
    auto reader = stub.GenerateStream(ctx.get(), req);
    v1::GenerateStreamResponse msg;
    while (reader->Read(&msg)) {
    }
    return reader->Finish().ok();
  }
  v1::GenerateResponse resp;
  return stub.Generate(ctx.get(), req, &resp).ok();
}

}  // namespace

int RunBench(int argc, char** argv) {
  std::vector<std::string> flags = GenerateFlags();
  flags.insert(flags.end(), {"clients", "requests"});
  absl::StatusOr<CliArgs> args = ParseWithConnection(argc, argv, flags, GenerateBoolFlags());
  if (!args.ok()) return ReportError(args.status());
  if (args->Flag("help")) {
    std::fprintf(stderr, "kvctl bench [--clients 16] [--requests 200] [--stream] [generate flags; default "
                         "--prompt hello --max-new-tokens 1]\n%s", kConnectionUsage);
    return 0;
  }
  absl::StatusOr<int64_t> clients = args->GetInt("clients", 16), requests = args->GetInt("requests", 200);
  if (!clients.ok()) return ReportError(clients.status());
  if (!requests.ok()) return ReportError(requests.status());
  if (*clients < 1 || *requests < 1) {
    return ReportError(absl::InvalidArgumentError("--clients and --requests must be >= 1"));
  }
  absl::StatusOr<v1::GenerateRequest> req = BuildGenerateRequest(*args);
  if (!req.ok()) return ReportError(req.status());
  if (req->prompts_size() == 0) req->add_prompts()->set_text("hello");
  if (!req->stopping().has_max_new_tokens()) req->mutable_stopping()->set_max_new_tokens(1);
  const bool stream = args->Flag("stream");
  absl::StatusOr<Connection> conn = Connect(*args);
  if (!conn.ok()) return ReportError(conn.status());
  auto stub = v1::Generation::NewStub(conn->channel);
  for (int i = 0; i < 5; ++i) Call(*stub, *conn, *req, stream);  // connect and warm up

  std::atomic<int64_t> next{0}, errors{0};
  std::vector<std::vector<double>> latencies(*clients);
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int64_t c = 0; c < *clients; ++c) {
    threads.emplace_back([&, c] {
      while (next.fetch_add(1) < *requests) {
        const auto s = std::chrono::steady_clock::now();
        if (!Call(*stub, *conn, *req, stream)) errors.fetch_add(1);
        latencies[c].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - s).count());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<double> all;
  for (const auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  auto pct = [&](double p) { return all.empty() ? 0.0 : all[std::min(all.size() - 1, size_t(p * all.size()))]; };
  std::printf("%s clients=%lld requests=%lld seconds=%.3f req/s=%.1f p50_ms=%.2f p99_ms=%.2f errors=%lld\n",
              stream ? "stream" : "unary", static_cast<long long>(*clients), static_cast<long long>(*requests),
              seconds, *requests / seconds, pct(0.5) * 1e3, pct(0.99) * 1e3, static_cast<long long>(errors.load()));
  return errors.load() == 0 ? 0 : 1;
}

}  // namespace kvserve::kvctl
