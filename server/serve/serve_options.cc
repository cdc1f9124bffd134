// Parsing and range checks of the `kvserve serve` flags.
#include "server/serve/serve_options.h"

#include "absl/strings/str_cat.h"
#include "server/serve/kv_flags.h"

namespace kvserve {

namespace {

const char kUsage[] =
    "kvserve serve --model PATH|random:PRESET [--host 0.0.0.0] [--port 50051 (0: any)] [--port-file F]\n"
    "  [--metrics-host 0.0.0.0] [--metrics-port 9400 (0: any, -1: off)] [--tls-cert PEM --tls-key PEM]\n"
    "  [--http-port N (OpenAI-compatible HTTP API; 0: any, -1: off =-1)] [--http-workers 64] [--http-timeout 30]\n"
    "  [--tls-client-ca PEM (mutual TLS: client certificates required, verified against it)]\n"
    "  [--api-key-file F (bearer tokens, one per line: calls without one get UNAUTHENTICATED)]\n"
    "  [--metrics-tls (HTTPS on the metrics port with --tls-cert/--tls-key, and --tls-client-ca if given)]\n"
    "  [--metrics-api-key-file F (bearer tokens GET /metrics requires; /health and /ready stay open)]\n"
    "  [--max-receive-message-bytes 64M] [--max-prompts-per-call 64] [--max-context N (0: model's)]\n"
    "  [--max-tokenize-bytes 8M (Tokenize text)] [--max-concurrent-tokenize 4 (Tokenize/Detokenize calls)]\n"
    "  [--default-max-new-tokens 128] [--max-new-tokens-limit N (0: max context)]\n"
    "  [--kv-memory BYTES|FRACTION=1G] [--page-size 16] [--prefill-chunk 512] [--max-batch-tokens 2048]\n"
    "  [--max-waiting 256] [--decode-share S=0.1] [--max-long-prefills N=1 (0: no limit)] [--drain-timeout SECONDS=30]\n"
    "  [--device cpu|cuda|auto =cpu] (auto: CUDA when a GPU is present, else CPU; on CUDA the KV pool is\n"
    "   device memory, --kv-memory FRACTION a share of its free memory, and only full, snapkv, pyramid\n"
    "   and criticalkv with a fixed budget run)\n"
    "  [--deterministic] (CPU: a request's tokens bit-identical whatever else is batched and whatever\n"
    "   --prefill-chunk; slower prefill)\n"
    "default KV compression for requests that leave kv.* fields empty:\n";

}  // namespace

std::string ServeUsage() { return std::string(kUsage) + KvFlagsHelp(); }

absl::StatusOr<ServeOptions> ParseServeOptions(int argc, char** argv, bool* help) {
  std::vector<std::string> flags = {
      "model", "host", "port", "port-file", "metrics-host", "metrics-port", "http-port", "http-workers",
      "http-timeout", "tls-cert", "tls-key",
      "tls-client-ca", "api-key-file", "metrics-api-key-file",
      "max-receive-message-bytes", "max-prompts-per-call", "max-tokenize-bytes", "max-concurrent-tokenize",
      "max-context", "default-max-new-tokens",
      "max-new-tokens-limit", "kv-memory", "page-size", "prefill-chunk", "max-batch-tokens", "max-waiting",
      "decode-share", "max-long-prefills", "drain-timeout", "device"};
  flags.insert(flags.end(), KvFlagNames().begin(), KvFlagNames().end());
  absl::StatusOr<CliArgs> parsed = CliArgs::Parse(argc, argv, flags, {"deterministic", "metrics-tls"}, ServeUsage());
  if (!parsed.ok()) return parsed.status();
  const CliArgs& a = *parsed;
  *help = a.help();
  ServeOptions o;
  o.args = a;
  if (*help) return o;
  if (!a.Get("model")) return absl::InvalidArgumentError("--model is required");
  o.model = *a.Get("model");
  o.host = a.Get("host").value_or(o.host);
  o.port_file = a.Get("port-file").value_or("");
  o.metrics_host = a.Get("metrics-host").value_or(o.metrics_host);
  o.tls_cert = a.Get("tls-cert").value_or("");
  o.tls_key = a.Get("tls-key").value_or("");
  o.tls_client_ca = a.Get("tls-client-ca").value_or("");
  o.api_key_file = a.Get("api-key-file").value_or("");
  o.metrics_api_key_file = a.Get("metrics-api-key-file").value_or("");
  o.metrics_tls = a.Flag("metrics-tls");
  o.kv_memory = a.Get("kv-memory").value_or(o.kv_memory);
  o.device = a.Get("device").value_or(o.device);
  o.deterministic = a.Flag("deterministic");
  // Checked here so a typo fails before the server listens; the backend is made at load.
  if (o.device != "cpu" && o.device != "cuda" && o.device != "auto") {
    return absl::InvalidArgumentError(absl::StrCat("--device must be auto, cpu or cuda, got '", o.device, "'"));
  }
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (o.metrics_tls && o.tls_cert.empty()) {
    return absl::InvalidArgumentError("--metrics-tls needs --tls-cert and --tls-key (the metrics port uses them)");
  }
  if (!o.tls_client_ca.empty() && o.tls_cert.empty()) {
    return absl::InvalidArgumentError("--tls-client-ca needs --tls-cert and --tls-key (mutual TLS is TLS)");
  }

  // Every integer flag with its inclusive range.
  struct IntFlag {
    const char* name;
    int64_t* out;
    int64_t lo, hi;
  };
  int64_t port = o.port, metrics_port = o.metrics_port, http_port = o.http_port;
  const IntFlag ints[] = {
      {"port", &port, 0, 65535},
      {"metrics-port", &metrics_port, -1, 65535},
      {"http-port", &http_port, -1, 65535},
      {"http-workers", &o.http_workers, 1, 4096},
      {"http-timeout", &o.http_timeout_seconds, 1, 3600},
      {"max-receive-message-bytes", &o.max_receive_message_bytes, 1024, INT32_MAX},
      {"max-prompts-per-call", &o.max_prompts_per_call, 1, 1 << 20},
      {"max-tokenize-bytes", &o.max_tokenize_bytes, 1, INT32_MAX},
      {"max-concurrent-tokenize", &o.max_concurrent_tokenize, 1, 1024},
      {"max-context", &o.max_context, 0, int64_t{1} << 30},
      {"default-max-new-tokens", &o.default_max_new_tokens, 1, int64_t{1} << 30},
      {"max-new-tokens-limit", &o.max_new_tokens_limit, 0, int64_t{1} << 30},
      {"page-size", &o.page_size, 1, 1 << 16},
      {"prefill-chunk", &o.prefill_chunk, 1, int64_t{1} << 30},
      {"max-batch-tokens", &o.max_batch_tokens, 1, int64_t{1} << 30},
      {"max-waiting", &o.max_waiting, 0, int64_t{1} << 30},
      {"max-long-prefills", &o.max_long_prefills, 0, int64_t{1} << 30},
  };
  for (const IntFlag& f : ints) {
    absl::StatusOr<int64_t> v = a.GetInt(f.name, *f.out);
    if (!v.ok()) return v.status();
    if (*v < f.lo || *v > f.hi) {
      return absl::InvalidArgumentError(absl::StrCat("--", f.name, " must be in [", f.lo, ", ", f.hi, "], got ", *v));
    }
    *f.out = *v;
  }
  o.port = static_cast<int>(port);
  o.metrics_port = static_cast<int>(metrics_port);
  o.http_port = static_cast<int>(http_port);
  absl::StatusOr<double> drain = a.GetDouble("drain-timeout", o.drain_timeout_seconds);
  if (!drain.ok()) return drain.status();
  if (!(*drain >= 0 && *drain <= 86400)) {
    return absl::InvalidArgumentError(absl::StrCat("--drain-timeout must be in [0, 86400] seconds, got ", *drain));
  }
  o.drain_timeout_seconds = *drain;
  absl::StatusOr<double> share = a.GetDouble("decode-share", o.decode_share);
  if (!share.ok()) return share.status();
  o.decode_share = *share;  // its range is checked with the rest of the scheduler's config
  return o;
}

}  // namespace kvserve
