// `kvctl bench`: N client threads send the same generate request (default: "hello", 1 new
// token) back to back, unary or streaming; prints requests/s and latency percentiles, and
// with --stream the time to the first streamed token. The request-overhead figures in
// docs/PERF.md and the long-context load test (load-tests/) come from here.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kvserve/v1/generation.grpc.pb.h"
#include "server/kvctl/kvctl_channel.h"
#include "server/kvctl/kvctl_commands.h"

namespace kvserve::kvctl {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point from, Clock::time_point to) { return std::chrono::duration<double>(to - from).count(); }

struct CallResult {
  bool ok = false;
  double latency_s = 0;
  double ttft_s = -1;  // streaming only: when the first token arrived
};

CallResult Call(v1::Generation::Stub& stub, const Connection& conn, const v1::GenerateRequest& req, bool stream) {
  std::unique_ptr<grpc::ClientContext> ctx = conn.NewContext();
  CallResult r;
  const Clock::time_point start = Clock::now();
  if (stream) {
    auto reader = stub.GenerateStream(ctx.get(), req);
    v1::GenerateStreamResponse msg;
    while (reader->Read(&msg)) {
      if (r.ttft_s < 0 && msg.has_chunk() && msg.chunk().token_ids_size() > 0) r.ttft_s = Seconds(start, Clock::now());
    }
    r.ok = reader->Finish().ok();
  } else {
    v1::GenerateResponse resp;
    r.ok = stub.Generate(ctx.get(), req, &resp).ok();
  }
  r.latency_s = Seconds(start, Clock::now());
  return r;
}

// The p-quantile (nearest rank) of sorted values, 0 when there are none.
double Percentile(const std::vector<double>& sorted, double p) {
  return sorted.empty() ? 0.0 : sorted[std::min(sorted.size() - 1, static_cast<size_t>(p * sorted.size()))];
}

}  // namespace

int RunBench(int argc, char** argv) {
  std::vector<std::string> flags = GenerateFlags();
  flags.insert(flags.end(), {"clients", "requests", "warmup"});
  absl::StatusOr<CliArgs> args = ParseWithConnection(
      argc, argv, flags, GenerateBoolFlags(),
      "kvctl bench [--clients 16] [--requests 200] [--warmup 5] [--stream] [generate flags; default "
      "--prompt hello --max-new-tokens 1]\n");
  if (!args.ok()) return ReportError(args.status());
  if (args->help()) return 0;
  absl::StatusOr<int64_t> clients = args->GetInt("clients", 16), requests = args->GetInt("requests", 200),
                          warmup = args->GetInt("warmup", 5);
  for (const auto* v : {&clients, &requests, &warmup}) {
    if (!v->ok()) return ReportError(v->status());
  }
  if (*clients < 1 || *requests < 1 || *warmup < 0) {
    return ReportError(absl::InvalidArgumentError(absl::StrCat("--clients (", *clients, ") and --requests (", *requests,
                                                               ") must be >= 1, --warmup (", *warmup, ") >= 0")));
  }
  absl::StatusOr<v1::GenerateRequest> req = BuildGenerateRequest(*args);
  if (!req.ok()) return ReportError(req.status());
  if (req->prompts_size() == 0) req->add_prompts()->set_text("hello");
  if (!req->stopping().has_max_new_tokens()) req->mutable_stopping()->set_max_new_tokens(1);
  const bool stream = args->Flag("stream");
  absl::StatusOr<Connection> conn = Connect(*args);
  if (!conn.ok()) return ReportError(conn.status());
  auto stub = v1::Generation::NewStub(conn->channel);
  for (int64_t i = 0; i < *warmup; ++i) Call(*stub, *conn, *req, stream);  // connect and warm up

  std::atomic<int64_t> next{0}, errors{0};
  std::vector<std::vector<CallResult>> results(*clients);
  const Clock::time_point t0 = Clock::now();
  std::vector<std::thread> threads;
  for (int64_t c = 0; c < *clients; ++c) {
    threads.emplace_back([&, c] {
      while (next.fetch_add(1) < *requests) {
        results[c].push_back(Call(*stub, *conn, *req, stream));
        if (!results[c].back().ok) errors.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const double seconds = Seconds(t0, Clock::now());
  std::vector<double> latency, ttft;
  for (const auto& per_client : results) {
    for (const CallResult& r : per_client) {
      latency.push_back(r.latency_s);
      if (r.ttft_s >= 0) ttft.push_back(r.ttft_s);
    }
  }
  std::sort(latency.begin(), latency.end());
  std::sort(ttft.begin(), ttft.end());
  std::printf("%s clients=%lld requests=%lld seconds=%.3f req/s=%.1f p50_ms=%.2f p99_ms=%.2f", stream ? "stream" : "unary",
              static_cast<long long>(*clients), static_cast<long long>(*requests), seconds, *requests / seconds,
              Percentile(latency, 0.5) * 1e3, Percentile(latency, 0.99) * 1e3);
  if (stream) std::printf(" ttft_p50_ms=%.2f ttft_p99_ms=%.2f", Percentile(ttft, 0.5) * 1e3, Percentile(ttft, 0.99) * 1e3);
  std::printf(" errors=%lld\n", static_cast<long long>(errors.load()));
  return errors.load() == 0 ? 0 : 1;
}

}  // namespace kvserve::kvctl
