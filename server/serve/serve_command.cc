// `kvserve serve`: the gRPC server. Start-up order matters: the server listens (health
// NOT_SERVING) before the model loads, so orchestrators see it alive but not ready; then
// the engine starts and health turns SERVING. SIGTERM/SIGINT drain: health goes
// NOT_SERVING, new calls get UNAVAILABLE, running ones get --drain-timeout to finish, and
// what is left is cancelled.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/kv/kv_memory.h"
#include "engine/model/model_loader.h"
#include "engine/scheduler/engine.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "kernels/backend.h"
#include "prometheus/registry.h"
#include "server/flags/command_status.h"
#include "server/serve/device_backend.h"
#include "server/serve/grpc_generation_service.h"
#include "server/serve/kv_flags.h"
#include "server/serve/metrics.h"
#include "server/serve/api_keys.h"
#include "server/serve/grpc_log_limit.h"
#include "server/serve/http_api_server.h"
#include "server/serve/metrics_http.h"
#include "server/serve/metrics_state_collector.h"
#include "server/serve/serve_options.h"
#include "server/serve/serve_tracker.h"
#include "server/serve/tls_files.h"

namespace kvserve {
namespace {

int Fail(const absl::Status& st) { return ReportFailure("kvserve serve", st); }

std::shared_ptr<grpc::ServerCredentials> Credentials(const ServeOptions& o, absl::Status* st) {
  if (o.tls_cert.empty()) return grpc::InsecureServerCredentials();
  auto read = [&](const std::string& path) {
    std::ifstream in(path);
    if (!in) *st = absl::NotFoundError(absl::StrCat("TLS file '", path, "' cannot be read"));
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  grpc::SslServerCredentialsOptions ssl;
  const std::string key = read(o.tls_key), cert = read(o.tls_cert);
  if (!st->ok()) return nullptr;
  if (absl::Status check = CheckTlsKeyPair(cert, key); !check.ok()) {
    *st = check;
    return nullptr;
  }
  ssl.pem_key_cert_pairs.push_back({key, cert});
  if (!o.tls_client_ca.empty()) {
    // Mutual TLS: a client without a certificate signed by this CA fails the handshake.
    ssl.pem_root_certs = read(o.tls_client_ca);
    if (!st->ok()) return nullptr;
    if (absl::Status check = CheckTlsCa(ssl.pem_root_certs); !check.ok()) {
      *st = check;
      return nullptr;
    }
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

void SetHealth(grpc::Server& server, bool serving) {
  grpc::HealthCheckServiceInterface* h = server.GetHealthCheckService();
  h->SetServingStatus(serving);  // every service, including ""
  h->SetServingStatus("kvserve.v1.Generation", serving);
}

// Written after every port is bound, via rename, so a reader never sees half a file.
absl::Status WritePortFile(const std::string& path, int grpc_port, int metrics_port, int http_port) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << "grpc=" << grpc_port << "\nmetrics=" << metrics_port << "\n";
    if (http_port >= 0) out << "http=" << http_port << "\n";
    if (!out) return absl::InternalError(absl::StrCat("--port-file '", path, "' cannot be written"));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("--port-file '", path, "' cannot be written"));
  }
  return absl::OkStatus();
}

struct LoadedEngine {
  Model model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Engine> engine;
  int64_t max_context = 0, max_new_tokens_limit = 0;
  CompressionSettings kv_defaults;
  DType kv_dtype = DType::kF32;  // the pool's K/V storage, for the ready line
};

absl::StatusOr<std::unique_ptr<LoadedEngine>> Load(const ServeOptions& o) {
  auto e = std::make_unique<LoadedEngine>();
  absl::StatusOr<Model> model = LoadModel(o.model);
  if (!model.ok()) return model.status();
  e->model = *std::move(model);
  absl::StatusOr<Tokenizer> tok = Tokenizer::Create(e->model.tokenizer);
  if (!tok.ok()) return tok.status();
  e->tokenizer = std::make_unique<Tokenizer>(*std::move(tok));
  const ModelConfig& c = e->model.config;
  e->max_context = o.max_context > 0 ? o.max_context : c.max_context;
  if (e->max_context > c.max_context) {
    std::fprintf(stderr,
                 "kvserve serve: warning: --max-context %lld is beyond the model's trained context %lld; RoPE "
                 "positions past it were never seen in training and quality will degrade\n",
                 static_cast<long long>(e->max_context), static_cast<long long>(c.max_context));
  }
  e->max_new_tokens_limit = o.max_new_tokens_limit > 0 ? o.max_new_tokens_limit : e->max_context;

  absl::StatusOr<std::unique_ptr<Backend>> backend = MakeBackendForDevice(
      o.device, o.deterministic ? Determinism::kBatchInvariant : Determinism::kFastest);
  if (!backend.ok()) return backend.status();
  e->backend = *std::move(backend);
  if (absl::Status st = UploadWeights(e->model, *e->tokenizer, *e->backend); !st.ok()) return st;
  absl::StatusOr<int64_t> bytes = KvMemoryBytes(o.kv_memory, *e->backend);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<DType> kv_dtype = KvDTypeFromArgs(o.args, *e->backend);
  if (!kv_dtype.ok()) return kv_dtype.status();
  absl::StatusOr<int64_t> pages = PagesForBytes(*bytes, {0, o.page_size, c.n_kv_heads, c.head_dim, *kv_dtype});
  if (!pages.ok()) return pages.status();
  EngineConfig config;
  config.num_pages = *pages;
  config.page_size = o.page_size;
  config.kv_dtype = *kv_dtype;
  e->kv_dtype = *kv_dtype;
  config.scheduler.max_batch_tokens = o.max_batch_tokens;
  config.scheduler.prefill_chunk = o.prefill_chunk;
  config.scheduler.max_waiting = o.max_waiting;
  config.scheduler.decode_share = o.decode_share;
  config.scheduler.max_long_prefills = o.max_long_prefills;
  config.scheduler.max_context = e->max_context;
  absl::StatusOr<CompressionSettings> kv = CompressionFromArgs(o.args, e->model);
  if (!kv.ok()) return kv.status();
  config.scheduler.kv_defaults = *kv;
  e->kv_defaults = *kv;
  absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Start(e->model, *e->tokenizer, *e->backend, config);
  if (!engine.ok()) return engine.status();
  e->engine = *std::move(engine);
  return e;
}

// Waits for SIGTERM or SIGINT (blocked in every thread, so only sigwait sees them).
int WaitForSignal(const sigset_t& signals) {
  int sig = 0;
  sigwait(&signals, &sig);
  return sig;
}

}  // namespace

int RunServe(int argc, char** argv) {
  bool help = false;
  absl::StatusOr<ServeOptions> parsed = ParseServeOptions(argc, argv, &help);
  if (!parsed.ok()) return Fail(parsed.status());
  if (help) return 0;
  const ServeOptions& o = *parsed;

  // Block the shutdown signals before any thread starts, so every thread inherits it.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // A TLS peer that hangs up mid-response makes OpenSSL's write raise SIGPIPE (it does not
  // send with MSG_NOSIGNAL), which would end the whole server; ignored, the write fails with
  // EPIPE and only that call ends.
  std::signal(SIGPIPE, SIG_IGN);

  auto registry = std::make_shared<prometheus::Registry>();
  ServerMetrics metrics(*registry);
  auto collector = std::make_shared<EngineStateCollector>();
  std::unique_ptr<MetricsHttpServer> metrics_http;
  int metrics_port = -1;
  std::optional<ApiKeys> metrics_keys;
  if (o.metrics_port >= 0) {
    MetricsHttpOptions metrics_options;
    if (o.metrics_tls) {
      absl::Status checked;  // the same file checks as gRPC's, so a bad pair is named the same way
      (void)Credentials(o, &checked);
      if (!checked.ok()) return Fail(checked);
      metrics_options.tls_cert = o.tls_cert;
      metrics_options.tls_key = o.tls_key;
      metrics_options.tls_client_ca = o.tls_client_ca;
    }
    if (!o.metrics_api_key_file.empty()) {
      absl::StatusOr<ApiKeys> loaded_keys = ApiKeys::Load(o.metrics_api_key_file);
      if (!loaded_keys.ok()) return Fail(loaded_keys.status());
      metrics_keys = *std::move(loaded_keys);
      metrics_options.api_keys = &*metrics_keys;
      metrics_options.on_auth_failure = [&metrics] { metrics.auth_failures().Increment(); };
    }
    absl::StatusOr<std::unique_ptr<MetricsHttpServer>> started =
        MetricsHttpServer::Start(o.metrics_host, o.metrics_port, {registry, collector}, metrics_options);
    if (!started.ok()) return Fail(started.status());
    metrics_http = *std::move(started);
    metrics_port = metrics_http->port();
  }

  LimitGrpcLogging();
  GenerationService service;
  std::optional<ApiKeys> api_keys;
  if (!o.api_key_file.empty()) {
    absl::StatusOr<ApiKeys> loaded_keys = ApiKeys::Load(o.api_key_file);
    if (!loaded_keys.ok()) return Fail(loaded_keys.status());
    api_keys = *std::move(loaded_keys);
    service.set_api_keys(&*api_keys, &metrics.auth_failures());
  }
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  absl::Status cred_status;
  std::shared_ptr<grpc::ServerCredentials> creds = Credentials(o, &cred_status);
  if (!cred_status.ok()) return Fail(cred_status);
  int grpc_port = 0;
  builder.AddListeningPort(absl::StrCat(o.host, ":", o.port), creds, &grpc_port);
  builder.SetMaxReceiveMessageSize(static_cast<int>(o.max_receive_message_bytes));
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || grpc_port == 0) {
    return Fail(absl::UnavailableError(absl::StrCat("cannot listen on ", o.host, ":", o.port)));
  }
  SetHealth(*server, false);
  // The OpenAI-compatible HTTP API: listening (503) while the model loads, like gRPC.
  std::unique_ptr<HttpApiServer> http_api;
  int http_port = -1;
  if (o.http_port >= 0) {
    HttpApiOptions http;
    http.host = o.host;
    http.port = o.http_port;
    http.workers = static_cast<int>(o.http_workers);
    http.io_timeout_seconds = static_cast<int>(o.http_timeout_seconds);
    http.max_body_bytes = o.max_receive_message_bytes;
    http.tls_cert = o.tls_cert;
    http.tls_key = o.tls_key;
    http.tls_client_ca = o.tls_client_ca;
    absl::StatusOr<std::unique_ptr<HttpApiServer>> started =
        HttpApiServer::Start(http, api_keys ? &*api_keys : nullptr, &metrics.auth_failures());
    if (!started.ok()) {
      server->Shutdown();
      return Fail(started.status());
    }
    http_api = *std::move(started);
    http_port = http_api->port();
  }
  std::fprintf(stderr, "kvserve serve: listening on %s:%d (metrics on :%d, HTTP API on :%d), loading %s\n",
               o.host.c_str(), grpc_port, metrics_port, http_port, o.model.c_str());
  if (!o.port_file.empty()) {
    if (absl::Status st = WritePortFile(o.port_file, grpc_port, metrics_port, http_port); !st.ok()) return Fail(st);
  }

  absl::StatusOr<std::unique_ptr<LoadedEngine>> loaded = Load(o);
  if (!loaded.ok()) {
    server->Shutdown();
    return Fail(loaded.status());
  }
  LoadedEngine& le = **loaded;
  RequestTracker tracker;
  ServeContext ctx{o, le.model, *le.tokenizer, *le.engine, metrics, tracker, le.max_context,
                   le.max_new_tokens_limit, le.engine->stats().pool.pages_total, le.kv_defaults};
  le.engine->SetStepObserver([&metrics](const EngineStepStats& s) { metrics.ObserveStep(s); });
  collector->set_backend(le.backend.get());
  collector->set_engine(le.engine.get());
  service.set_context(&ctx);
  if (http_api) http_api->set_context(&ctx);
  SetHealth(*server, true);
  if (metrics_http) metrics_http->set_ready(true);
  // The CPU kernels' OpenMP waiting, so an operator sees what a shared host will get.
  const std::string omp_wait = le.backend->Name() == "cpu" ? ", OpenMP wait: " + CpuOpenMpWait() : "";
  std::fprintf(stderr,
               "kvserve serve: ready on the %s backend (%lld KV pages of %lld tokens, %s K/V, max context %lld%s)\n",
               std::string(le.backend->Name()).c_str(), static_cast<long long>(ctx.kv_pages_total),
               static_cast<long long>(o.page_size), std::string(KvDTypeFlagName(le.kv_dtype)).c_str(),
               static_cast<long long>(ctx.max_context), omp_wait.c_str());

  const int sig = WaitForSignal(signals);
  const auto drain_deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(o.drain_timeout_seconds);
  std::fprintf(stderr, "kvserve serve: %s, draining %lld call(s) for up to %.1f s\n", strsignal(sig),
               static_cast<long long>(tracker.calls()), o.drain_timeout_seconds);
  SetHealth(*server, false);
  if (metrics_http) metrics_http->set_ready(false);
  tracker.StartDrain();
  if (!tracker.WaitIdle(std::chrono::duration<double>(o.drain_timeout_seconds))) {
    const std::vector<RequestHandle> left = tracker.handles();
    std::fprintf(stderr, "kvserve serve: drain timeout, cancelling %zu request(s)\n", left.size());
    for (RequestHandle h : left) (void)le.engine->Abort(h);
    tracker.WaitIdle(std::chrono::seconds(5));  // the cancelled calls write their last message
  }
  // Calls still open now (a client that stopped reading) are cancelled by the deadline.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server->Wait();
  // The engine cancels what is left and ends. A step that does not end (a stuck engine)
  // must not keep the process past the drain (the HTTP calls below would wait for it): the
  // engine gets what is left of --drain-timeout, at least 5 s (a long prefill step on a CPU
  // takes seconds), then the process exits without it.
  const auto grace = std::max<std::chrono::duration<double>>(std::chrono::seconds(5),
                                                             drain_deadline - std::chrono::steady_clock::now());
  if (!le.engine->Stop(grace)) {
    std::fprintf(stderr, "kvserve serve: the engine is still in a step after the drain; exiting without it\n");
    std::fflush(nullptr);
    std::_Exit(1);
  }
  // HTTP calls still open end with their aborted requests (or a write timeout); then the
  // server goes, before the context it serves.
  http_api.reset();
  service.set_context(nullptr);
  collector->set_engine(nullptr);
  collector->set_backend(nullptr);
  std::fprintf(stderr, "kvserve serve: stopped\n");
  return 0;
}

}  // namespace kvserve
