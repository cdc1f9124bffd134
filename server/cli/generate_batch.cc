// The --prompts-file path of `kvserve generate`: reads the prompts, sizes the KV pool from
// --kv-memory, submits everything to an Engine and prints completions in prompt order.
#include "server/cli/generate_batch.h"

#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/kv/kv_memory.h"
#include "engine/scheduler/engine.h"
#include "server/flags/command_status.h"
#include "server/serve/device_backend.h"

namespace kvserve {
namespace {

int Fail(const absl::Status& st) { return ReportFailure("kvserve", st); }

struct Completion {
  std::string text;
  absl::Status status;
  bool done = false;
};

}  // namespace

int RunGenerateBatch(const CliArgs& args, const GenerationOptions& options, const Model& model,
                     const Tokenizer& tokenizer, int64_t max_context, Backend& backend) {
  const std::string path = *args.Get("prompts-file");
  std::ifstream in(path);
  if (!in) return Fail(absl::NotFoundError(absl::StrCat("--prompts-file '", path, "' cannot be read")));
  std::vector<std::string> prompts;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) prompts.push_back(line);
  }
  if (prompts.empty()) return Fail(absl::InvalidArgumentError(absl::StrCat("--prompts-file '", path, "' has no prompts")));

  if (absl::Status st = UploadWeights(model, tokenizer, backend); !st.ok()) return Fail(st);
  absl::StatusOr<int64_t> bytes = KvMemoryBytes(args.Get("kv-memory").value_or("512M"), backend);
  if (!bytes.ok()) return Fail(bytes.status());
  EngineConfig config;
  config.page_size = options.page_size;
  if (config.page_size < 1) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--page-size must be >= 1, got ", config.page_size)));
  }
  config.kv_dtype = options.kv_dtype;
  absl::StatusOr<int64_t> pages =
      PagesForBytes(*bytes, {0, config.page_size, model.config.n_kv_heads, model.config.head_dim, config.kv_dtype});
  if (!pages.ok()) return Fail(pages.status());
  config.num_pages = *pages;
  absl::StatusOr<int64_t> batch_tokens = args.GetInt("max-batch-tokens", 2048);
  absl::StatusOr<int64_t> max_waiting = args.GetInt("max-waiting", 1024);
  absl::StatusOr<double> decode_share = args.GetDouble("decode-share", config.scheduler.decode_share);
  if (!batch_tokens.ok()) return Fail(batch_tokens.status());
  if (!max_waiting.ok()) return Fail(max_waiting.status());
  if (!decode_share.ok()) return Fail(decode_share.status());
  config.scheduler.decode_share = *decode_share;
  config.scheduler.max_batch_tokens = *batch_tokens;
  config.scheduler.max_waiting = *max_waiting;
  config.scheduler.prefill_chunk = options.prefill_chunk;
  config.scheduler.max_context = max_context;
  config.scheduler.kv_defaults = options.compression;
  auto engine = Engine::Start(model, tokenizer, backend, config);
  if (!engine.ok()) return Fail(engine.status());

  std::mutex mu;
  std::condition_variable cv;
  std::vector<Completion> out(prompts.size());
  int remaining = static_cast<int>(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    EngineRequest r;
    r.prompt = tokenizer.Encode(prompts[i], tokenizer.add_bos(), /*parse_special=*/true);
    r.max_new_tokens = options.max_new_tokens;
    r.sampling = options.sampling;
    r.stop_sequences = options.stop_sequences;
    r.stop_token_ids = options.stop_token_ids;
    r.ignore_eos = options.ignore_eos;
    r.sink = [&, i](const StreamEvent& e) {
      std::lock_guard<std::mutex> lock(mu);
      out[i].text += e.text;
      if (e.finished) {
        out[i].status = e.status;
        out[i].done = true;
        --remaining;
        cv.notify_all();
      }
    };
    absl::StatusOr<RequestHandle> h = (*engine)->Submit(std::move(r));
    if (!h.ok()) return Fail(absl::Status(h.status().code(), absl::StrCat("prompt ", i + 1, ": ", h.status().message())));
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return remaining == 0; });
  }
  const PagePoolStats stats = (*engine)->pool_stats();
  int rc = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!out[i].status.ok()) {
      std::fprintf(stderr, "kvserve: prompt %zu: %s\n", i + 1, std::string(out[i].status.message()).c_str());
      rc = 1;
      continue;
    }
    std::printf("[%zu] %s\n", i + 1, out[i].text.c_str());
  }
  if (args.Flag("timing")) {
    std::fprintf(stderr, "KV pool: %lld pages of %lld bytes, peak %lld used\n",
                 static_cast<long long>(stats.pages_total), static_cast<long long>(stats.page_bytes),
                 static_cast<long long>(stats.pages_peak));
  }
  return rc;
}

}  // namespace kvserve
