// The one table of command-line flags: placeholder and meaning of every flag of kvserve and kvctl.
#include "server/flags/flag_help.h"

#include <algorithm>
#include <array>

namespace kvserve {
namespace {

struct Row {
  std::string_view name;
  FlagHelp help;
};

// Sorted by name (HelpOf searches it); a command's own defaults are in its usage text.
constexpr Row kFlags[] = {
    {"add-bos", {"", "prepend the model's BOS token"}},
    {"add-special-tokens", {"", "add the model's special tokens (BOS) when tokenizing"}},
    {"addr", {"HOST:PORT", "the kvserve gRPC address (default localhost:50051)"}},
    {"answer-tokens", {"N", "tokens of each retrieval answer scored"}},
    {"api-key-file", {"F", "bearer tokens, one per line (serve: required of every call; kvctl: the first is sent)"}},
    {"auto-risks", {"R,...", "auto:RISK budgets to add as rows (needs --compress-at prefill_end)"}},
    {"batch", {"N", "sequences decoded together"}},
    {"budget-plan", {"PLAN", "per-layer quotas: uniform, pyramid or ripple:PROFILE.json"}},
    {"budgets", {"B,...", "KV budgets: fractions of the prompt in (0, 1]"}},
    {"calibration", {"FILE[,FILE...]", "calibration text files (repeatable)"}},
    {"chat", {"", "render the prompt with the model's chat template"}},
    {"check", {"PROFILE.json", "rank-correlate a profile with measured per-layer damage"}},
    {"chunk-headroom", {"N", "chunk mode: KV entries a layer may hold above its budget during the prompt "
                             "(peak KV = budget + N; mid-prompt compressions keep budget + (N - chunk) / 2; "
                             "below the prefill chunk: back to the budget after every chunk)"}},
    {"chunk-scoring", {"MODE", "chunk mode scoring: question (the question's queries, right after the chunk), "
                               "question_at_end (the same at the question's own positions) or window (the chunk's own)"}},
    {"clients", {"N", "concurrent clients"}},
    {"compress-at", {"WHEN", "when to compress: prefill_end or chunk (during the prompt, within budget + --chunk-headroom)"}},
    {"context", {"N", "context length in tokens"}},
    {"contexts", {"N,...", "context lengths in tokens"}},
    {"continuation", {"N", "continuation tokens scored for KL"}},
    {"corpus", {"DIR", "the text corpus of long prompts (default tests/data/corpus)"}},
    {"count", {"N", "refreshes before exiting (0: until Ctrl-C)"}},
    {"deadline", {"SECONDS", "per-call deadline (0: none)"}},
    {"decode-share", {"S", "share of engine time kept for decoding while a long prompt prefills, in [0, 0.9]"}},
    {"default-max-new-tokens", {"N", "max_new_tokens of a request that sets none"}},
    {"deterministic", {"", "CPU: a request's tokens bit-identical whatever else is batched with it and whatever "
                           "--prefill-chunk (slower prefill)"}},
    {"device", {"DEVICE", "compute backend: cpu, cuda, or auto (CUDA when a GPU is present, else CPU)"}},
    {"drain-timeout", {"SECONDS", "on SIGTERM, wait this long for calls, then cancel them"}},
    {"evicted-weight", {"WHAT", "the evicted entries' weight: drop, merge (each to the kept entry with the nearest "
                             "key), merge-near (only to a like one) or merge-values (merge-near, and each kept value "
                             "becomes the weighted mean of the values merged into it) or merge-mid (merge-near at "
                             "chunk mode's mid-prompt cuts, drop at the prompt's end); default merge-mid for "
                             "snapkv/criticalkv in chunk mode, else drop"}},
    {"first-stage-ratio", {"R", "CriticalKV: share of the budget chosen by attention alone"}},
    {"fit-count", {"N", "requests submitted to measure admission"}},
    {"fit-memory", {"BYTES", "measure how many requests a pool of this size admits at once"}},
    {"frequency-penalty", {"P", "frequency penalty"}},
    {"host", {"HOST", "address the gRPC server listens on"}},
    {"http-port", {"PORT", "OpenAI-compatible HTTP API port, on --host (0: the OS picks, -1: off)"}},
    {"http-timeout", {"SECONDS", "HTTP API: per read or write on a connection; a client stalled longer is dropped"}},
    {"http-workers", {"N", "HTTP API: connections served at once (a generation holds one until it ends)"}},
    {"ids", {"", "print token ids instead of text"}},
    {"ignore-eos", {"", "keep generating past the end-of-sequence token"}},
    {"interval", {"SECONDS", "seconds between refreshes"}},
    {"json", {"FILE", "also write every cell as JSON"}},
    {"kv-budget", {"B", "KV budget: fraction <= 1 of the prompt, tokens per layer, or auto:RISK"}},
    {"kv-dtype", {"DTYPE", "K/V storage: f16 (the CPU default; half of f32's KV memory) or f32 (CUDA's only)"}},
    {"kv-memory", {"BYTES|FRACTION", "KV pool size: bytes (512M, 2G) or a fraction of free (device) memory"}},
    {"kv-policy", {"POLICY", "KV compression: full, streaming, snapkv, criticalkv, pyramid, keydiff, mergereduce:random, "
                           "mergereduce:cluster"}},
    {"kv-window", {"N", "observation window: the prompt's last N tokens score the rest"}},
    {"layer-budget", {"N", "tokens the one compressed layer keeps"}},
    {"max-batch-tokens", {"N", "tokens in one engine step (prefill chunks plus decodes)"}},
    {"max-concurrent-tokenize", {"N", "Tokenize/Detokenize calls served at once (more: RESOURCE_EXHAUSTED)"}},
    {"max-context", {"N", "context limit in tokens (default: the model's trained context)"}},
    {"max-long-prefills", {"N", "prompts with more than one chunk left prefilled in the same step, oldest first (0: no limit)"}},
    {"max-new-tokens", {"N", "tokens to generate at most"}},
    {"max-new-tokens-limit", {"N", "largest max_new_tokens a request may ask for (0: the context)"}},
    {"max-prompts-per-call", {"N", "prompts one Generate call may carry"}},
    {"max-receive-message-bytes", {"BYTES", "largest gRPC request message"}},
    {"max-tokenize-bytes", {"BYTES", "the most text one Tokenize call may carry"}},
    {"max-tokens", {"N", "tokens per calibration sample"}},
    {"max-waiting", {"N", "requests that may wait for admission before new ones are refused"}},
    {"metrics", {"HOST:PORT", "the kvserve metrics endpoint (default localhost:9400)"}},
    {"metrics-api-key-file", {"F", "bearer tokens, one per line, that GET /metrics requires (/health, /ready open)"}},
    {"metrics-host", {"HOST", "address the metrics endpoint listens on"}},
    {"metrics-port", {"PORT", "metrics port (0: the OS picks, -1: off)"}},
    {"metrics-tls", {"", "serve the metrics port over HTTPS with --tls-cert/--tls-key (and --tls-client-ca)"}},
    {"min-p", {"P", "min-p sampling cutoff, in [0, 1]"}},
    {"model", {"PATH|random:PRESET", "the model: a GGUF file, a Hugging Face folder, or random:<preset>"}},
    {"new-tokens", {"N", "tokens decoded per repeat"}},
    {"no-full-reference", {"", "eval: skip each sample's full-cache prefill (chunk-mode retrieval rows only; "
                               "answer NLLs, no gaps to the full cache)"}},
    {"no-special", {"", "treat special-token text as plain text"}},
    {"out", {"FILE", "where to write the result"}},
    {"page-size", {"N", "tokens per KV page"}},
    {"perturbation-scale", {"X", "noise scale relative to each layer's value RMS"}},
    {"pieces", {"", "print each token's text piece too"}},
    {"policies", {"P,...", "rows: POLICY[@PLAN][/MODE], e.g. snapkv@pyramid/chunk"}},
    {"pool-kernel", {"K", "SnapKV score pooling kernel (odd)"}},
    {"port", {"PORT", "gRPC port (0: the OS picks)"}},
    {"port-file", {"FILE", "write grpc=PORT and metrics=PORT here once listening"}},
    {"prefill-chunk", {"N", "prompt tokens per prefill step"}},
    {"presence-penalty", {"P", "presence penalty"}},
    {"prompt", {"TEXT", "the prompt"}},
    {"prompt-file", {"FILE", "read the prompt from a file (for prompts past the shell's argument limit)"}},
    {"prompt-style", {"STYLE", "eval prompt framing: plain or chat"}},
    {"prompt-tokens", {"N", "prompt length in tokens"}},
    {"prompts-file", {"FILE", "one prompt per line, all run as one continuous batch"}},
    {"question-tokens", {"N", "chunk mode: the prompt's last N tokens are the question (default: the window)"}},
    {"reduce-protected-dims", {"M", "mergereduce:cluster: dominant dimensions protected (capped at head_dim)"}},
    {"repeats", {"N", "timed repeats"}},
    {"repetition-penalty", {"R", "repetition penalty (1: none)"}},
    {"request-id", {"ID", "request id echoed in the response and the server's logs"}},
    {"requests", {"N", "requests in all"}},
    {"ripple-gamma", {"G", "RippleKV: clip per-layer weights to [1/G, G]"}},
    {"ripple-profile", {"PROFILE.json", "RippleKV profile for @ripple rows"}},
    {"ripple-r", {"R", "RippleKV: weight disparity r in w = r^s"}},
    {"sample-range", {"I:J", "run samples I..J-1 of --samples N only (the same samples a whole run draws)"}},
    {"samples", {"N", "samples to measure"}},
    {"scored-tokens", {"N", "tokens at the end of each sample whose KL is scored"}},
    {"seed", {"S", "seed of the run's randomness"}},
    {"service", {"NAME", "the service to check (default: the server as a whole)"}},
    {"sink-tokens", {"N", "the prompt's first N entries every policy keeps (default 4 streaming/merge-reduce, 0 scoring)"}},
    {"stop", {"TEXT", "stop when this text is generated (repeatable)"}},
    {"stop-token-id", {"ID", "stop at this token id (repeatable)"}},
    {"stream", {"", "stream tokens as they are generated"}},
    {"system", {"TEXT", "system message for --chat"}},
    {"tasks", {"T,...", "eval tasks: kl, passkey, multikey, multivalue, vartrack"}},
    {"temperature", {"T", "sampling temperature (0: greedy)"}},
    {"text", {"TEXT", "the text to tokenize"}},
    {"timing", {"", "print timings and KV statistics on stderr"}},
    {"tls", {"", "connect with TLS"}},
    {"tls-ca", {"PEM", "CA certificate to trust"}},
    {"tls-cert", {"PEM", "TLS certificate (with --tls-key)"}},
    {"tls-client-ca", {"PEM", "mutual TLS: client certificates must be signed by this CA"}},
    {"tls-key", {"PEM", "TLS private key (with --tls-cert)"}},
    {"tls-server-name", {"NAME", "server name to verify"}},
    {"token-ids", {"'1 2 3'", "the prompt as token ids"}},
    {"top-k", {"K", "sample from the K most likely tokens (0: all)"}},
    {"top-p", {"P", "nucleus sampling cutoff, in (0, 1]"}},
    {"usage", {"", "print the finish reason, usage and timings on stderr"}},
    {"verbose", {"", "print every sample's result on stderr"}},
    {"wait", {"SECONDS", "retry until serving or this many seconds pass"}},
    {"warmup", {"N", "requests before timing starts"}},
};

constexpr bool Sorted() {
  for (size_t i = 1; i < std::size(kFlags); ++i) {
    if (!(kFlags[i - 1].name < kFlags[i].name)) return false;
  }
  return true;
}
static_assert(Sorted(), "kFlags must be sorted by name, without repeats");

}  // namespace

FlagHelp HelpOf(std::string_view name) {
  const Row* end = std::end(kFlags);
  const Row* it = std::lower_bound(std::begin(kFlags), end, name,
                                   [](const Row& r, std::string_view n) { return r.name < n; });
  return it != end && it->name == name ? it->help : FlagHelp{};
}

}  // namespace kvserve
