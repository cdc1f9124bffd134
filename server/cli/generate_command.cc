// `kvserve generate` and `kvserve tokenize`: run the model from the command line.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/generator.h"
#include "engine/kv/kv_memory.h"
#include "engine/model/model_loader.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/backend.h"
#include "server/cli/context_flag.h"
#include "server/cli/generate_batch.h"
#include "server/flags/cli_args.h"
#include "server/flags/command_status.h"
#include "server/serve/device_backend.h"
#include "server/serve/kv_flags.h"

namespace kvserve {
namespace {

int Fail(const absl::Status& st) { return ReportFailure("kvserve", st); }

absl::StatusOr<GenerationOptions> OptionsFromArgs(const CliArgs& a) {
  GenerationOptions o;
  auto i64 = [&](const char* name, int64_t def) { return a.GetInt(name, def); };
  auto f64 = [&](const char* name, double def) { return a.GetDouble(name, def); };
  absl::StatusOr<int64_t> max_new = i64("max-new-tokens", 128), top_k = i64("top-k", 0),
                          page = i64("page-size", 16), chunk = i64("prefill-chunk", 512),
                          seed = i64("seed", 0);
  absl::StatusOr<double> temp = f64("temperature", 0), top_p = f64("top-p", 1), min_p = f64("min-p", 0),
                         rep = f64("repetition-penalty", 1);
  for (const absl::Status& st : {max_new.status(), top_k.status(), page.status(), chunk.status(),
                                 seed.status(), temp.status(), top_p.status(), min_p.status(), rep.status()}) {
    if (!st.ok()) return st;
  }
  if (*max_new < 1 || *max_new > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(absl::StrCat("--max-new-tokens must be >= 1, got ", *max_new));
  }
  if (*top_k < 0 || *top_k > INT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat("--top-k must be >= 0, got ", *top_k));
  }
  o.max_new_tokens = static_cast<int32_t>(*max_new);
  o.page_size = *page;
  o.prefill_chunk = *chunk;
  o.sampling.temperature = static_cast<float>(*temp);
  o.sampling.top_k = static_cast<int32_t>(*top_k);
  o.sampling.top_p = static_cast<float>(*top_p);
  o.sampling.min_p = static_cast<float>(*min_p);
  o.sampling.repetition_penalty = static_cast<float>(*rep);
  o.sampling.seed = static_cast<uint64_t>(*seed);
  o.stop_sequences = a.GetAll("stop");
  for (const std::string& s : a.GetAll("stop-token-id")) {
    int32_t id;
    if (!absl::SimpleAtoi(s, &id)) {
      return absl::InvalidArgumentError(absl::StrCat("--stop-token-id must be an integer, got '", s, "'"));
    }
    o.stop_token_ids.push_back(id);
  }
  o.ignore_eos = a.Flag("ignore-eos");
  return o;
}

}  // namespace

int RunGenerate(int argc, char** argv) {
  std::vector<std::string> value_flags = {"model", "prompt", "prompt-file", "system", "max-new-tokens", "temperature",
                                          "top-k", "top-p", "min-p", "repetition-penalty", "seed", "stop",
                                          "stop-token-id", "max-context", "page-size", "prefill-chunk",
                                          "prompts-file", "kv-memory", "max-batch-tokens", "max-waiting",
                                          "decode-share", "device"};
  value_flags.insert(value_flags.end(), KvFlagNames().begin(), KvFlagNames().end());
  const std::string usage = std::string(
                 "kvserve generate --model PATH|random:PRESET (--prompt TEXT | --prompt-file F) [--chat [--system TEXT]]\n"
                 "  [--max-new-tokens N=128] [--temperature T=0 (greedy)] [--top-k K] [--top-p P]\n"
                 "  [--min-p P] [--repetition-penalty R] [--seed S] [--stop TEXT]... [--stop-token-id ID]...\n"
                 "  [--ignore-eos] [--max-context N] [--page-size N=16] [--prefill-chunk N=512] [--timing]\n"
                 "  [--device cpu|cuda|auto =cpu] (auto: CUDA when a GPU is present, else CPU)\n"
                 "  [--deterministic] (CPU: a prompt's tokens bit-identical whatever is batched with it and\n"
                 "   whatever --prefill-chunk; slower prefill)\n"
                 "kvserve generate --model M --prompts-file F (one prompt per line, run as one batch)\n"
                 "  [--kv-memory BYTES|FRACTION=512M (a fraction of free device memory on CUDA)]\n"
                 "  [--max-batch-tokens N=2048] [--max-waiting N=1024] [--decode-share S=0]\n"
                 "  [--device cpu|cuda|auto =cpu]\n"
                 "KV compression (both forms):\n") + KvFlagsHelp();
  KV_ASSIGN_OR_FAIL(args, CliArgs::Parse(argc, argv, value_flags, {"chat", "ignore-eos", "timing", "deterministic"},
                                         usage));
  if (args.help()) return 0;
  auto model_spec = args.Get("model");
  if (!model_spec) return Fail(absl::InvalidArgumentError("--model is required"));
  KV_ASSIGN_OR_FAIL(options, OptionsFromArgs(args));
  const std::string device = args.Get("device").value_or("cpu");
  const Determinism determinism = args.Flag("deterministic") ? Determinism::kBatchInvariant : Determinism::kFastest;
  if (args.Has("prompts-file")) {
    KV_ASSIGN_OR_FAIL(batch_backend, MakeBackendForDevice(device, determinism));
    KV_ASSIGN_OR_FAIL(batch_kv_dtype, KvDTypeFromArgs(args, *batch_backend));
    options.kv_dtype = batch_kv_dtype;
    KV_ASSIGN_OR_FAIL(batch_model, LoadModel(*model_spec));
    KV_ASSIGN_OR_FAIL(batch_kv, CompressionFromArgs(args, batch_model));
    options.compression = batch_kv;
    KV_ASSIGN_OR_FAIL(batch_tokenizer, Tokenizer::Create(batch_model.tokenizer));
    KV_ASSIGN_OR_FAIL(batch_context, MaxContextFromArgs(args, batch_model.config));
    return RunGenerateBatch(args, options, batch_model, batch_tokenizer, batch_context, *batch_backend);
  }
  // --prompt-file: the whole file is the prompt (a prompt past the shell's 128 KiB argument
  // limit cannot go through --prompt).
  if (args.Has("prompt") && args.Has("prompt-file")) {
    return Fail(absl::InvalidArgumentError("give --prompt or --prompt-file, not both"));
  }
  std::optional<std::string> prompt_text = args.Get("prompt");
  if (auto path = args.Get("prompt-file")) {
    KV_ASSIGN_OR_FAIL(file_text, ReadFlagFile("prompt-file", *path));
    prompt_text = file_text;
  }
  if (!prompt_text || prompt_text->empty()) {
    return Fail(absl::InvalidArgumentError(args.Has("prompt-file") ? "--prompt-file is empty" : "--prompt is empty"));
  }
  KV_ASSIGN_OR_FAIL(model, LoadModel(*model_spec));
  KV_ASSIGN_OR_FAIL(tokenizer, Tokenizer::Create(model.tokenizer));
  KV_ASSIGN_OR_FAIL(kv_settings, CompressionFromArgs(args, model));
  options.compression = kv_settings;

  std::string text = *prompt_text;
  if (args.Flag("chat")) {
    std::vector<ChatMessage> msgs;
    if (auto sys = args.Get("system")) msgs.push_back({"system", *sys});
    msgs.push_back({"user", text});
    KV_ASSIGN_OR_FAIL(rendered, RenderChat(model.tokenizer, msgs, true));
    text = rendered;
  }
  std::vector<int32_t> prompt = tokenizer.Encode(text, tokenizer.add_bos(), /*parse_special=*/true);

  KV_ASSIGN_OR_FAIL(max_context, MaxContextFromArgs(args, model.config));
  if (absl::Status st = ValidateGeneration(model, prompt, options, max_context); !st.ok()) {
    if (static_cast<int64_t>(prompt.size()) > max_context && !args.Has("max-context")) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat(st.message(), " (pass --max-context to go beyond it)")));
    }
    return Fail(st);
  }
  // One prompt runs alone, so the pool --kv-memory describes only has to hold its peak, and
  // --max-batch-tokens bounds its prefill steps.
  KV_ASSIGN_OR_FAIL(backend, MakeBackendForDevice(device, determinism));
  KV_ASSIGN_OR_FAIL(kv_dtype, KvDTypeFromArgs(args, *backend));
  options.kv_dtype = kv_dtype;
  if (auto spec = args.Get("kv-memory")) {
    KV_ASSIGN_OR_FAIL(bytes, KvMemoryBytes(*spec, *backend));
    KV_ASSIGN_OR_FAIL(pages, PagesForBytes(bytes, {0, options.page_size, model.config.n_kv_heads,
                                                   model.config.head_dim, options.kv_dtype}));
    const int64_t need = PeakPagesForGeneration(model, static_cast<int64_t>(prompt.size()), options);
    if (need > pages) {
      return Fail(absl::ResourceExhaustedError(absl::StrCat(
          "request needs ", need, " KV pages; --kv-memory ", *spec, " holds only ", pages, " pages")));
    }
  }
  KV_ASSIGN_OR_FAIL(batch_tokens, args.GetInt("max-batch-tokens", options.prefill_chunk));
  if (batch_tokens < 1) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--max-batch-tokens must be >= 1, got ", batch_tokens)));
  }
  options.prefill_chunk = std::min(options.prefill_chunk, batch_tokens);
  auto result = Generate(model, tokenizer, *backend, prompt, options, [](std::string_view piece) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  });
  if (!result.ok()) return Fail(result.status());
  std::fputc('\n', stdout);
  if (args.Flag("timing")) {
    std::fprintf(stderr,
                 "prompt %zu tokens, prefill %.3f s (%.1f tok/s); generated %zu tokens, decode %.3f s "
                 "(%.1f tok/s); finish: %s\n",
                 prompt.size(), result->prefill_seconds, prompt.size() / result->prefill_seconds,
                 result->tokens.size(), result->decode_seconds,
                 result->tokens.size() > 1 ? (result->tokens.size() - 1) / result->decode_seconds : 0.0,
                 std::string(FinishReasonName(result->finish_reason)).c_str());
    const CompressionStats& cs = result->compression;
    std::fprintf(stderr,
                 "kv: policy %s, peak %lld pages (%.2f MiB), %lld slots kept at the end, %lld evicted in %lld "
                 "compactions (select %.3f s, compact %.3f s)\n",
                 options.compression.policy.c_str(), static_cast<long long>(result->peak_kv_pages),
                 result->peak_kv_bytes / 1048576.0, static_cast<long long>(result->kv_slots_at_end),
                 static_cast<long long>(cs.evicted_slots), static_cast<long long>(cs.compactions), cs.select_seconds,
                 cs.compact_seconds);
  }
  return 0;
}

int RunTokenize(int argc, char** argv) {
  KV_ASSIGN_OR_FAIL(args, CliArgs::Parse(argc, argv, {"model", "text"}, {"no-special", "add-bos"},
                                         "kvserve tokenize --model PATH|random:PRESET --text TEXT [--add-bos] [--no-special]\n"
                                         "  prints the token ids of TEXT, space-separated"));
  if (args.help()) return 0;
  auto model_spec = args.Get("model");
  if (!model_spec) return Fail(absl::InvalidArgumentError("--model is required"));
  auto text = args.Get("text");
  if (!text) return Fail(absl::InvalidArgumentError("--text is required"));
  KV_ASSIGN_OR_FAIL(model, LoadModel(*model_spec));
  KV_ASSIGN_OR_FAIL(tokenizer, Tokenizer::Create(model.tokenizer));
  std::vector<int32_t> ids = tokenizer.Encode(*text, args.Flag("add-bos"), !args.Flag("no-special"));
  std::cout << absl::StrJoin(ids, " ") << "\n";
  return 0;
}

}  // namespace kvserve
