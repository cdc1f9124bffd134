// Single-prompt generation as a one-request scheduler run.
#include "engine/generator.h"

#include <chrono>
#include <optional>

#include "engine/kv/kv_memory.h"
#include "engine/kv/page_pool.h"
#include "engine/scheduler/scheduler.h"

namespace kvserve {
namespace {

EngineRequest RequestFor(absl::Span<const int32_t> prompt, const GenerationOptions& o) {
  EngineRequest r;
  r.prompt.assign(prompt.begin(), prompt.end());
  r.max_new_tokens = o.max_new_tokens;
  r.sampling = o.sampling;
  r.stop_sequences = o.stop_sequences;
  r.stop_token_ids = o.stop_token_ids;
  r.ignore_eos = o.ignore_eos;
  return r;
}

}  // namespace

absl::Status ValidateGeneration(const Model& model, absl::Span<const int32_t> prompt,
                                const GenerationOptions& o, int64_t max_context) {
  if (absl::Status st = ValidateCompressionSettings(o.compression, model.config.n_layers); !st.ok()) return st;
  return ValidateRequest(model, RequestFor(prompt, o), {max_context, o.page_size, o.prefill_chunk});
}

int64_t PeakPagesForGeneration(const Model& model, int64_t prompt_len, const GenerationOptions& o) {
  if (o.compression.active()) {
    auto compressor = SequenceCompressor::Create(model, o.compression, prompt_len, o.max_new_tokens, o.page_size,
                                                 o.prefill_chunk);
    if (compressor.ok()) return (*compressor)->PeakPages();
  }
  return PeakPagesForRequest(prompt_len, o.max_new_tokens, o.page_size, model.config.n_layers);
}

absl::StatusOr<GenerationResult> Generate(const Model& model, const Tokenizer& tokenizer,
                                          Backend& backend, absl::Span<const int32_t> prompt,
                                          const GenerationOptions& o,
                                          const std::function<void(std::string_view)>& on_text,
                                          bool keep_logits) {
  using Clock = std::chrono::steady_clock;
  if (absl::Status st = ValidateCompressionSettings(o.compression, model.config.n_layers); !st.ok()) return st;
  if (absl::Status st = CheckKvDType(o.kv_dtype, backend); !st.ok()) return st;
  const ModelConfig& c = model.config;
  const int64_t prompt_len = static_cast<int64_t>(prompt.size());
  // A pool of exactly the request's peak: a compressor that overran its budget would fail here.
  PagePoolShape shape{PeakPagesForGeneration(model, prompt_len, o), o.page_size, c.n_kv_heads, c.head_dim,
                      o.kv_dtype};
  PagePool pool(shape, &backend);
  SchedulerConfig config;
  config.prefill_chunk = o.prefill_chunk;
  config.max_batch_tokens = o.prefill_chunk;  // one chunk per step, as a lone request gets
  config.max_context = prompt_len + o.max_new_tokens;
  config.kv_defaults = o.compression;
  Scheduler scheduler(model, tokenizer, backend, pool, config);

  GenerationResult result;
  std::optional<absl::Status> failed;
  bool finished = false;
  const auto t0 = Clock::now();
  std::optional<Clock::time_point> first_token;
  EngineRequest request = RequestFor(prompt, o);
  request.keep_logits = keep_logits;
  request.sink = [&](const StreamEvent& e) {
    if (!first_token) first_token = Clock::now();
    if (!e.logits.empty()) result.step_logits.push_back(e.logits);
    if (e.token >= 0) result.tokens.push_back(e.token);
    if (!e.text.empty()) {
      result.text += e.text;
      if (on_text) on_text(e.text);
    }
    if (!e.finished) return;
    finished = true;
    if (!e.status.ok()) {
      failed = e.status;
      return;
    }
    result.finish_reason = e.finish_reason;
    result.compression = e.kv_compression;
    result.kv_slots_at_end = e.kv_tokens_kept;
  };
  absl::StatusOr<RequestHandle> handle = scheduler.Submit(std::move(request));
  if (!handle.ok()) return handle.status();
  while (!finished) {
    if (absl::Status st = scheduler.StepAndDeliver(); !st.ok()) return st;
  }
  if (failed) return *failed;
  // The pool is this request's alone: its high-water mark is the request's peak, the pages a
  // compaction holds for a moment included.
  result.peak_kv_pages = pool.stats().pages_peak;
  result.peak_kv_bytes = result.peak_kv_pages * PagePool::PageBytes(shape);
  const auto t1 = first_token.value_or(Clock::now());
  result.prefill_seconds = std::chrono::duration<double>(t1 - t0).count();
  result.decode_seconds = std::chrono::duration<double>(Clock::now() - t1).count();
  return result;
}

}  // namespace kvserve
