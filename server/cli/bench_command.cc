// `kvserve bench`: prefill and decode throughput of one sequence on fixed token ids, so the
// same ids can be fed to a peer (scripts/bench_vs_llama_cpp.py) in the same run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/compress/device_compressor.h"
#include "engine/compress/sequence_compressor.h"
#include "engine/kv/kv_memory.h"
#include "engine/model/forward.h"
#include "engine/model/model_loader.h"
#include "engine/model/step_bytes.h"
#include "engine/scheduler/scheduler.h"
#include "engine/tokenizer/tokenizer.h"
#include "server/cli/context_flag.h"
#include "server/flags/cli_args.h"
#include "server/flags/command_status.h"
#include "server/serve/device_backend.h"
#include "server/serve/kv_flags.h"

namespace kvserve {
namespace {

int Fail(const absl::Status& st) { return ReportFailure("kvserve bench", st); }

// How many requests of this shape a pool of `fit_memory` admits at once: submits `count`
// of them to a Scheduler (admission happens at Submit) and reads how many run.
int BenchAdmission(const Model& model, Backend& backend, const std::vector<int32_t>& prompt, int64_t n_new,
                   int64_t chunk, const CompressionSettings& kv, const PagePoolShape& page_shape,
                   const std::string& fit_memory, int64_t count) {
  auto available = AvailableMemoryBytes();
  auto bytes = ParseKvMemory(fit_memory, available.ok() ? *available : 0);
  if (!bytes.ok()) return Fail(bytes.status());
  auto pages = PagesForBytes(*bytes, page_shape);
  if (!pages.ok()) return Fail(pages.status());
  auto tokenizer = Tokenizer::Create(model.tokenizer);
  if (!tokenizer.ok()) return Fail(tokenizer.status());
  PagePoolShape shape = page_shape;
  shape.num_pages = *pages;
  PagePool pool(shape);
  SchedulerConfig config;
  config.prefill_chunk = chunk;
  config.max_waiting = count;
  config.max_context = static_cast<int64_t>(prompt.size()) + n_new;
  config.kv_defaults = kv;
  Scheduler sched(model, *tokenizer, backend, pool, config);
  for (int64_t i = 0; i < count; ++i) {
    EngineRequest r;
    r.prompt = prompt;
    r.max_new_tokens = static_cast<int32_t>(n_new);
    r.ignore_eos = true;
    if (auto h = sched.Submit(std::move(r)); !h.ok()) return Fail(h.status());
  }
  std::printf("{\"engine\":\"kvserve\",\"kv_policy\":\"%s\",\"compress_at\":\"%s\",\"kv_budget\":%g,"
              "\"kv_memory\":\"%s\",\"pool_pages\":%lld,\"page_bytes\":%lld,\"prompt_tokens\":%zu,"
              "\"submitted\":%lld,\"admitted_at_once\":%lld,\"reserved_pages\":%lld}\n",
              kv.policy.c_str(), std::string(CompressAtName(kv.at)).c_str(), kv.active() ? kv.budget : 1.0, fit_memory.c_str(),
              static_cast<long long>(*pages), static_cast<long long>(PagePool::PageBytes(pool.shape())),
              prompt.size(), static_cast<long long>(count), static_cast<long long>(sched.num_running()),
              static_cast<long long>(pool.stats().pages_reserved));
  sched.AbortAll();
  return 0;
}

}  // namespace

int RunBench(int argc, char** argv) {
  std::vector<std::string> flags = {"model", "prompt-tokens", "new-tokens", "repeats", "prefill-chunk", "batch",
                                    "fit-memory", "fit-count", "device", "page-size", "max-context"};
  flags.insert(flags.end(), KvFlagNames().begin(), KvFlagNames().end());
  const std::string usage = std::string(
      "kvserve bench --model PATH|random:PRESET [--prompt-tokens N=512] [--new-tokens N=128] [--repeats N=3]\n"
      "  [--prefill-chunk N=512] [--batch B=1] [--page-size N=16] [--max-context N (default: the model's)]\n"
      "  [--device cpu|cuda|auto =cpu] [--fit-memory BYTES [--fit-count N=16]]\n"
      "  prefill and decode throughput of fixed token ids, one JSON line on stdout\n"
      "KV compression:\n") + KvFlagsHelp();
  auto args = CliArgs::Parse(argc, argv, flags, {"deterministic"}, usage);
  if (!args.ok()) return Fail(args.status());
  if (args->help()) return 0;
  auto spec = args->Get("model");
  if (!spec) return Fail(absl::InvalidArgumentError("--model is required"));
  auto n_prompt = args->GetInt("prompt-tokens", 512), n_new = args->GetInt("new-tokens", 128),
       repeats = args->GetInt("repeats", 3), chunk = args->GetInt("prefill-chunk", 512),
       batch = args->GetInt("batch", 1), page_size = args->GetInt("page-size", 16);
  for (const auto* v : {&n_prompt, &n_new, &repeats, &chunk, &batch, &page_size}) {
    if (!v->ok()) return Fail(v->status());
    if (**v < 1) return Fail(absl::InvalidArgumentError("bench counts must be >= 1"));
  }
  auto model = LoadModel(*spec);
  if (!model.ok()) return Fail(model.status());
  const ModelConfig& c = model->config;
  auto max_context = MaxContextFromArgs(*args, c);
  if (!max_context.ok()) return Fail(max_context.status());
  if (*n_prompt + *n_new > *max_context) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "--prompt-tokens ", *n_prompt, " + --new-tokens ", *n_new, " is ", *n_prompt + *n_new,
        " tokens; the context limit is ", *max_context,
        args->Has("max-context") ? "" : " (pass --max-context to go beyond it)")));
  }
  const Determinism determinism = args->Flag("deterministic") ? Determinism::kBatchInvariant : Determinism::kFastest;
  auto made_backend = MakeBackendForDevice(args->Get("device").value_or("cpu"), determinism);
  if (!made_backend.ok()) return Fail(made_backend.status());
  std::unique_ptr<Backend> backend = *std::move(made_backend);
  auto kv = CompressionFromArgs(*args, *model);
  if (!kv.ok()) return Fail(kv.status());
  // On a device, SnapKV-scored policies compress through the device kernels
  // (device_compressor.h); the others, and the admission count, read pages on the host.
  if (!backend->HostMemory() && ((kv->active() && !DeviceSelectionFor(*kv)) || args->Has("fit-memory"))) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "--kv-policy ", kv->policy, " and --fit-memory run on the CPU backend only (snapkv, pyramid and criticalkv "
        "also run on CUDA), got --device ", *args->Get("device"))));
  }

  auto kv_dtype = KvDTypeFromArgs(*args, *backend);
  if (!kv_dtype.ok()) return Fail(kv_dtype.status());
  if (absl::Status st = CheckKvDType(*kv_dtype, *backend); !st.ok()) return Fail(st);

  // Deterministic ids spread over the vocabulary, the same ones the peer script uses for
  // sequence 0; sequence b is shifted by b so batched sequences differ.
  const int64_t nb = *batch;
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(nb), std::vector<int32_t>(static_cast<size_t>(*n_prompt)));
  for (int64_t b = 0; b < nb; ++b) {
    for (int64_t i = 0; i < *n_prompt; ++i) prompts[b][i] = static_cast<int32_t>((i * 7919 + 13 + b) % c.vocab_size);
  }

  if (auto fit = args->Get("fit-memory")) {
    auto count = args->GetInt("fit-count", 16);
    if (!count.ok()) return Fail(count.status());
    return BenchAdmission(*model, *backend, prompts[0], *n_new, *chunk, *kv, {0, *page_size, c.n_kv_heads, c.head_dim,
                          *kv_dtype}, *fit, *count);
  }

  // Prefill: each sequence's prompt in chunks (one sequence per step); decode: one token for
  // every sequence per step, greedy.
  // With a KV policy, each sequence compresses as the generator does; the compression time
  // is part of the prefill and decode times, and reported on its own too.
  double best_prefill = 1e30, best_decode = 1e30;
  CompressionStats best_stats;
  int64_t peak_pages = 0;
  bool probes_question = false;
  int64_t decode_kv_bytes = 0;  // K/V bytes the decode steps read, all sequences (the last repeat's)
  for (int64_t r = 0; r < *repeats; ++r) {
    decode_kv_bytes = 0;
    std::vector<std::unique_ptr<SequenceCompressor>> comps(static_cast<size_t>(nb));
    PagePoolShape shape{0, *page_size, c.n_kv_heads, c.head_dim, *kv_dtype};
    for (int64_t b = 0; b < nb; ++b) {
      if (kv->active()) {
        auto made = SequenceCompressor::Create(*model, *kv, *n_prompt, *n_new, shape.page_size, *chunk);
        if (!made.ok()) return Fail(made.status());
        comps[b] = *std::move(made);
        shape.num_pages += comps[b]->PeakPages();
        probes_question = comps[b]->ProbesQuestion();
      } else {
        shape.num_pages += PeakPagesForRequest(*n_prompt, *n_new, shape.page_size, c.n_layers);
      }
    }
    PagePool pool(shape, backend.get());
    std::vector<SequenceKv> seqs(static_cast<size_t>(nb), SequenceKv(c.n_layers));
    auto window = [&](int64_t b) { return comps[b] ? comps[b]->window() : nullptr; };
    auto compress = [&](int64_t b, bool prompt_done) {
      return comps[b] ? comps[b]->AfterStep(*backend, pool, seqs[b], prompt_done) : absl::OkStatus();
    };
    LlamaForward fwd(*model, *backend, pool);
    std::vector<float> logits;
    std::vector<int32_t> next(static_cast<size_t>(nb));
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t b = 0; b < nb; ++b) {
      for (int64_t pos = 0; pos < *n_prompt;) {
        // As served: in chunk mode a step may carry a probe of the question after the chunk.
        const auto prompt = absl::MakeConstSpan(prompts[b]);
        const SequenceCompressor::PrefillStep chunk_step =
            SequenceCompressor::NextPrefillOf(comps[b].get(), prompt, pos, *chunk, seqs[b]);
        logits.clear();
        ForwardRequest req{chunk_step.tokens, pos, &seqs[b], false, window(b), chunk_step.probe_tokens,
                           chunk_step.probe_start_pos};
        if (auto st = fwd.Step({&req, 1}, &logits); !st.ok()) return Fail(st);
        pos += chunk_step.prompt_tokens;
        if (auto st = compress(b, pos == *n_prompt); !st.ok()) return Fail(st);
      }
      next[b] = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    }
    const auto t1 = std::chrono::steady_clock::now();
    // Sequence 0's compression work during its prefill (its share of the prefill time).
    const CompressionStats prefill_stats = comps[0] ? comps[0]->stats() : CompressionStats{};
    std::vector<ForwardRequest> step(static_cast<size_t>(nb));
    for (int64_t i = 0; i < *n_new; ++i) {
      for (int64_t b = 0; b < nb; ++b) {
        step[b] = {absl::MakeConstSpan(&next[b], 1), *n_prompt + i, &seqs[b], false, window(b)};
        decode_kv_bytes += KvBytesPerDecodeToken(seqs[b], shape);
      }
      logits.clear();
      if (auto st = fwd.Step(step, &logits); !st.ok()) return Fail(st);
      for (int64_t b = 0; b < nb; ++b) {
        if (auto st = compress(b, true); !st.ok()) return Fail(st);
        const float* row = logits.data() + b * c.vocab_size;
        next[b] = static_cast<int32_t>(std::max_element(row, row + c.vocab_size) - row);
      }
    }
    const auto t2 = std::chrono::steady_clock::now();
    const double prefill = std::chrono::duration<double>(t1 - t0).count();
    if (prefill < best_prefill && comps[0]) best_stats = prefill_stats;
    peak_pages = pool.stats().pages_peak;
    best_prefill = std::min(best_prefill, prefill);
    best_decode = std::min(best_decode, std::chrono::duration<double>(t2 - t1).count());
    for (auto& s : seqs) s.Release(pool);
  }
  const int64_t page_bytes = PagePool::PageBytes({0, *page_size, c.n_kv_heads, c.head_dim, *kv_dtype});
  // What a decode step reads, on average: every weight once, and each sequence's K/V. Against
  // the machine's streaming read rate (tests/bench/stream_bandwidth_bench.cc) it gives the
  // decode roofline; decode_read_gb_s is the rate the decode steps achieved.
  const double step_bytes =
      static_cast<double>(WeightBytesPerStep(model->weights)) + static_cast<double>(decode_kv_bytes) / *n_new;
  // The CPU kernels' ISA (KVSERVE_CPU_ISA forces one), so runs of both can be told apart.
  const std::string cpu_isa(backend->Name() == "cpu" ? CpuKernelIsa() : "none");
  const std::string kv_prefetch(backend->Name() == "cpu" ? CpuKvPrefetchLevel() : "none");
  const std::string weight_prefetch(backend->Name() == "cpu" ? CpuWeightPrefetch() : "none");
  const std::string omp_wait(backend->Name() == "cpu" ? CpuOpenMpWait() : "none");
  std::printf("{\"engine\":\"kvserve\",\"cpu_isa\":\"%s\",\"cpu_kv_prefetch\":\"%s\",\"cpu_weight_prefetch\":\"%s\",\"omp_wait\":\"%s\",\"kv_dtype\":\"%s\",\"deterministic\":%s,\"batch\":%lld,\"prompt_tokens\":%lld,\"new_tokens\":%lld,"
              "\"prefill_chunk\":%lld,\"prefill_tok_s\":%.2f,\"decode_tok_s\":%.2f,"
              "\"kv_policy\":\"%s\",\"compress_at\":\"%s\",\"chunk_scoring\":\"%s\",\"evicted_weight\":\"%s\",\"kv_budget\":%g,"
              "\"peak_kv_pages\":%lld,"
              "\"peak_kv_bytes\":%lld,\"prefill_compress_seconds\":%.4f,\"select_seconds\":%.4f,"
              "\"compact_seconds\":%.4f,\"decode_bytes_per_step\":%.0f,\"decode_read_gb_s\":%.2f}\n",
              cpu_isa.c_str(), kv_prefetch.c_str(), weight_prefetch.c_str(), omp_wait.c_str(), std::string(KvDTypeFlagName(*kv_dtype)).c_str(), determinism == Determinism::kBatchInvariant ? "true" : "false", static_cast<long long>(nb), static_cast<long long>(*n_prompt), static_cast<long long>(*n_new),
              static_cast<long long>(*chunk), nb * *n_prompt / best_prefill, nb * *n_new / best_decode,
              kv->policy.c_str(), std::string(CompressAtName(kv->at)).c_str(),
              probes_question ? "question" : "window", std::string(EvictedWeightName(EvictedWeightOf(*kv))).c_str(),
              kv->active() ? kv->budget : 1.0,
              static_cast<long long>(peak_pages), static_cast<long long>(peak_pages * page_bytes),
              best_stats.select_seconds + best_stats.compact_seconds, best_stats.select_seconds,
              best_stats.compact_seconds, step_bytes, step_bytes * *n_new / best_decode * 1e-9);
  return 0;
}

}  // namespace kvserve
