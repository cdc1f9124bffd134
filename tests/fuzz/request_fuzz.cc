// libFuzzer target for the request path: arbitrary bytes parsed as a GenerateRequest go
// through what a gRPC call does before the engine (BuildEngineRequests: tokenizing,
// templates, every field's checks, kv.* into KvSettings), then Scheduler::Prepare (KV
// settings resolved, compression set up, peak pages sized); whatever is accepted and small
// is run to the end on random:tiny. Any input must end in a Status or a finished request,
// within the time limit, with every page back in the pool.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "engine/kv/page_pool.h"
#include "engine/model/model_loader.h"
#include "engine/scheduler/engine.h"
#include "engine/scheduler/scheduler.h"
#include "engine/tokenizer/tokenizer.h"
#include "google/protobuf/stubs/logging.h"
#include "kernels/backend.h"
#include "kvserve/v1/generation.pb.h"
#include "prometheus/registry.h"
#include "server/serve/grpc_request.h"

namespace kvserve {
namespace {

// Small enough that a run of a few requests takes milliseconds on random:tiny.
constexpr int64_t kMaxPromptTokens = 512;
constexpr int32_t kMaxNewTokens = 6;
constexpr int64_t kPages = 1024;
constexpr int64_t kPageSize = 8;

void Check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "request_fuzz: %s\n", what);
  std::abort();
}

// Built once: the model, the serve context BuildEngineRequests reads, and a pool.
struct World {
  World() {
    // Parsing rejects a string field with invalid UTF-8, as gRPC does, and logs a line each
    // time: silence it, or the fuzzer's output is nothing else.
    google::protobuf::SetLogHandler(nullptr);
    absl::StatusOr<Model> m = MakeRandomModel("tiny", 7);
    Check(m.ok(), "random:tiny did not load");
    model = std::make_unique<Model>(*std::move(m));
    absl::StatusOr<Tokenizer> t = Tokenizer::Create(model->tokenizer);
    Check(t.ok(), "the tokenizer did not load");
    tokenizer = std::make_unique<Tokenizer>(*std::move(t));
    backend = MakeCpuBackend();
    EngineConfig config;
    config.num_pages = 16;
    config.page_size = kPageSize;
    absl::StatusOr<std::unique_ptr<Engine>> e = Engine::Start(*model, *tokenizer, *backend, config);
    Check(e.ok(), "the engine did not start");
    engine = *std::move(e);
    metrics = std::make_unique<ServerMetrics>(registry);
    ctx = std::make_unique<ServeContext>(ServeContext{options, *model, *tokenizer, *engine, *metrics, tracker,
                                                      model->config.max_context, model->config.max_context,
                                                      config.num_pages, CompressionSettings{}});
    pool = std::make_unique<PagePool>(
        PagePoolShape{kPages, kPageSize, model->config.n_kv_heads, model->config.head_dim}, backend.get());
    SchedulerConfig sc;
    sc.prefill_chunk = 64;
    sc.max_batch_tokens = 256;
    sc.max_waiting = 64;
    // One scheduler for every input: it is idle with an empty pool between them (checked).
    sched = std::make_unique<Scheduler>(*model, *tokenizer, *backend, *pool, sc);
  }

  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Engine> engine;  // ServeContext needs one; requests run on `pool` below
  prometheus::Registry registry;
  std::unique_ptr<ServerMetrics> metrics;
  ServeOptions options;
  RequestTracker tracker;
  std::unique_ptr<ServeContext> ctx;
  std::unique_ptr<PagePool> pool;
  std::unique_ptr<Scheduler> sched;
};

World& TheWorld() {
  static World* w = new World();  // never destroyed: the fuzzer exits without unwinding
  return *w;
}

}  // namespace
}  // namespace kvserve

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvserve;
  if (size == 0) return 0;
  World& w = TheWorld();
  // The first byte picks the call (stream or unary); the rest is the message.
  const bool streaming = data[0] & 1;
  v1::GenerateRequest req;
  if (!req.ParseFromArray(data + 1, static_cast<int>(size - 1))) return 0;
  absl::StatusOr<std::vector<EngineRequest>> built = BuildEngineRequests(*w.ctx, req, streaming);
  if (!built.ok()) {
    // What the client gets: a code, and a message short enough for its metadata limit.
    const grpc::Status sent = ToGrpcStatus(built.status());
    Check(sent.error_code() != grpc::StatusCode::OK, "an error without a code");
    Check(sent.error_message().size() <= 1100, "an error message longer than 1 KiB reached the client");
    return 0;
  }
  Scheduler& sched = *w.sched;
  auto finished = std::make_shared<int>(0);
  int submitted = 0;
  for (EngineRequest& r : *built) {
    if (static_cast<int64_t>(r.prompt.size()) > kMaxPromptTokens) continue;
    r.max_new_tokens = std::min(r.max_new_tokens, kMaxNewTokens);
    r.sink = [finished](const StreamEvent& e) {
      if (e.finished) ++*finished;
    };
    if (sched.Submit(std::move(r)).ok()) ++submitted;
  }
  // Each request needs at most ceil(prompt / chunk) + max_new steps; a scheduler that keeps
  // stepping past that is stuck.
  const int max_steps = static_cast<int>(built->size()) * (kMaxPromptTokens / 64 + kMaxNewTokens + 2) + 8;
  for (int i = 0; i < max_steps && !sched.idle(); ++i) (void)sched.StepAndDeliver();
  Check(sched.idle(), "the scheduler did not finish a small request in its step bound");
  Check(*finished == submitted, "a request ended without a final event");
  Check(sched.CheckInvariants().ok(), "page invariants broken");
  Check(w.pool->stats().pages_used == 0 && w.pool->stats().pages_reserved == 0, "pages leaked");
  return 0;
}
