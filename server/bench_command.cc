// `kvserve bench`: prefill and decode throughput of one sequence on fixed token ids, so the
// same ids can be fed to a peer (scripts/bench_vs_llama_cpp.py) in the same run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/kv/kv_memory.h"
#include "engine/model/forward.h"
#include "engine/model/model_loader.h"
#include "server/cli_args.h"

namespace kvserve {
namespace {

int BenchFail(const absl::Status& st) {
  std::fprintf(stderr, "kvserve bench: %s\n", std::string(st.message()).c_str());
  return 1;
}

}  // namespace

int RunBench(int argc, char** argv) {
  auto args = CliArgs::Parse(argc, argv, {"model", "prompt-tokens", "new-tokens", "repeats", "prefill-chunk", "batch"}, {});
  if (!args.ok()) return BenchFail(args.status());
  auto spec = args->Get("model");
  if (!spec) return BenchFail(absl::InvalidArgumentError("--model is required"));
  auto n_prompt = args->GetInt("prompt-tokens", 512), n_new = args->GetInt("new-tokens", 128),
       repeats = args->GetInt("repeats", 3), chunk = args->GetInt("prefill-chunk", 512),
       batch = args->GetInt("batch", 1);
  for (const auto* v : {&n_prompt, &n_new, &repeats, &chunk, &batch}) {
    if (!v->ok()) return BenchFail(v->status());
    if (**v < 1) return BenchFail(absl::InvalidArgumentError("bench counts must be >= 1"));
  }
  auto model = LoadModel(*spec);
  if (!model.ok()) return BenchFail(model.status());
  const ModelConfig& c = model->config;
  auto backend = MakeCpuBackend();

  // Deterministic ids spread over the vocabulary, the same ones the peer script uses for
  // sequence 0; sequence b is shifted by b so batched sequences differ.
  const int64_t nb = *batch;
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(nb), std::vector<int32_t>(static_cast<size_t>(*n_prompt)));
  for (int64_t b = 0; b < nb; ++b) {
    for (int64_t i = 0; i < *n_prompt; ++i) prompts[b][i] = static_cast<int32_t>((i * 7919 + 13 + b) % c.vocab_size);
  }

  // Prefill: each sequence's prompt in chunks (one sequence per step); decode: one token for
  // every sequence per step, greedy.
  double best_prefill = 1e30, best_decode = 1e30;
  for (int64_t r = 0; r < *repeats; ++r) {
    PagePoolShape shape{0, 16, c.n_kv_heads, c.head_dim};
    shape.num_pages = PeakPagesForRequest(*n_prompt, *n_new, shape.page_size, c.n_layers) * nb;
    PagePool pool(shape);
    std::vector<SequenceKv> seqs(static_cast<size_t>(nb), SequenceKv(c.n_layers));
    LlamaForward fwd(*model, *backend, pool);
    std::vector<float> logits;
    std::vector<int32_t> next(static_cast<size_t>(nb));
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t b = 0; b < nb; ++b) {
      for (int64_t pos = 0; pos < *n_prompt; pos += *chunk) {
        const int64_t n = std::min(*chunk, *n_prompt - pos);
        logits.clear();
        ForwardRequest req{absl::MakeConstSpan(prompts[b]).subspan(pos, n), pos, &seqs[b], false};
        if (auto st = fwd.Step({&req, 1}, &logits); !st.ok()) return BenchFail(st);
      }
      next[b] = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    }
    const auto t1 = std::chrono::steady_clock::now();
    std::vector<ForwardRequest> step(static_cast<size_t>(nb));
    for (int64_t i = 0; i < *n_new; ++i) {
      for (int64_t b = 0; b < nb; ++b) step[b] = {absl::MakeConstSpan(&next[b], 1), *n_prompt + i, &seqs[b], false};
      logits.clear();
      if (auto st = fwd.Step(step, &logits); !st.ok()) return BenchFail(st);
      for (int64_t b = 0; b < nb; ++b) {
        const float* row = logits.data() + b * c.vocab_size;
        next[b] = static_cast<int32_t>(std::max_element(row, row + c.vocab_size) - row);
      }
    }
    const auto t2 = std::chrono::steady_clock::now();
    best_prefill = std::min(best_prefill, std::chrono::duration<double>(t1 - t0).count());
    best_decode = std::min(best_decode, std::chrono::duration<double>(t2 - t1).count());
    for (auto& s : seqs) s.Release(pool);
  }
  std::printf("{\"engine\":\"kvserve\",\"batch\":%lld,\"prompt_tokens\":%lld,\"new_tokens\":%lld,"
              "\"prefill_chunk\":%lld,\"prefill_tok_s\":%.2f,\"decode_tok_s\":%.2f}\n",
              static_cast<long long>(nb), static_cast<long long>(*n_prompt), static_cast<long long>(*n_new),
              static_cast<long long>(*chunk), nb * *n_prompt / best_prefill, nb * *n_new / best_decode);
  return 0;
}

}  // namespace kvserve
