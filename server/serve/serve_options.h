// `kvserve serve` flags: where to listen, the engine's sizes and the per-request limits.
#pragma once
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "server/flags/cli_args.h"

namespace kvserve {

struct ServeOptions {
  std::string model;                   // --model: GGUF, HF folder or random:<preset>
  std::string host = "0.0.0.0";        // --host
  int port = 50051;                    // --port; 0 = the OS picks one
  std::string port_file;               // --port-file: "grpc=P\nmetrics=P\n" once listening
  int http_port = -1;                  // --http-port: the OpenAI-compatible API; 0 = the OS picks, -1 = off
  int64_t http_workers = 64;           // --http-workers: connections served at once
  int64_t http_timeout_seconds = 30;   // --http-timeout: per read or write
  std::string metrics_host = "0.0.0.0";
  int metrics_port = 9400;             // --metrics-port; 0 = the OS picks one, -1 = off
  std::string tls_cert, tls_key;       // --tls-cert/--tls-key: PEM files; both or neither
  std::string tls_client_ca;           // --tls-client-ca: PEM; client certificates required and verified
  std::string api_key_file;            // --api-key-file: bearer tokens, one per line
  bool metrics_tls = false;            // --metrics-tls: HTTPS with --tls-cert/--tls-key (and --tls-client-ca)
  std::string metrics_api_key_file;    // --metrics-api-key-file: bearer tokens /metrics requires
  // 128K tokens as text take ~0.5-2 MB, as ids under 1 MB; 64 MiB leaves room for batches.
  int64_t max_receive_message_bytes = 64 << 20;
  int64_t max_prompts_per_call = 64;
  // Tokenize/Detokenize run on the gRPC thread: their input is bounded (8 MiB of text is
  // ~2M tokens, far past any context) and so are the calls at once.
  int64_t max_tokenize_bytes = 8 << 20;   // --max-tokenize-bytes
  int64_t max_concurrent_tokenize = 4;    // --max-concurrent-tokenize
  int64_t max_context = 0;             // --max-context; 0 = the model's trained context
  int64_t default_max_new_tokens = 128;
  int64_t max_new_tokens_limit = 0;    // 0 = max_context
  std::string kv_memory = "1G";        // --kv-memory BYTES|FRACTION of available (device) memory
  std::string device = "cpu";          // --device cpu|cuda|auto: the backend of the engine and its KV pool
  bool deterministic = false;          // --deterministic: batch-invariant CPU kernels
  int64_t page_size = 16;
  int64_t prefill_chunk = 512;
  int64_t max_batch_tokens = 2048;
  int64_t max_waiting = 256;
  double decode_share = 0.1;           // --decode-share: see SchedulerConfig::decode_share
  int64_t max_long_prefills = 1;       // --max-long-prefills: see SchedulerConfig::max_long_prefills
  double drain_timeout_seconds = 30;   // --drain-timeout: SIGTERM waits this long, then cancels
  // Every flag as given; the --kv-* defaults (server/serve/kv_flags.h) are read from it once the
  // model is loaded, since a RippleKV profile is checked against the model.
  CliArgs args;
};

// Parses and checks the flags; the error names the flag and value. `help` is set for --help,
// whose text (the usage and every flag) is then printed.
absl::StatusOr<ServeOptions> ParseServeOptions(int argc, char** argv, bool* help);

// The usage text, --kv-* flags included.
std::string ServeUsage();

}  // namespace kvserve
