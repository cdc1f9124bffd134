// Single-sequence generation loop over LlamaForward.
#include "engine/generator.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "engine/compress/device_compressor.h"
#include "engine/kv/kv_memory.h"
#include "engine/kv/page_pool.h"
#include "engine/model/forward.h"
#include "engine/model/sampler.h"
#include "engine/tokenizer/stop_matcher.h"

namespace kvserve {

std::string_view FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kLength: return "length";
    case FinishReason::kEos: return "eos";
    case FinishReason::kStopSequence: return "stop_sequence";
    case FinishReason::kStopToken: return "stop_token";
  }
  return "?";
}

absl::Status ValidateGeneration(const Model& model, absl::Span<const int32_t> prompt,
                                const GenerationOptions& o, int64_t max_context) {
  if (prompt.empty()) return absl::InvalidArgumentError("prompt is empty");
  if (o.max_new_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat("max_new_tokens must be >= 1, got ", o.max_new_tokens));
  }
  const int64_t total = static_cast<int64_t>(prompt.size()) + o.max_new_tokens;
  if (static_cast<int64_t>(prompt.size()) > max_context) {
    return absl::InvalidArgumentError(absl::StrCat("prompt has ", prompt.size(),
                                                   " tokens, the context limit is ", max_context));
  }
  if (total > max_context) {
    return absl::InvalidArgumentError(absl::StrCat("prompt (", prompt.size(), " tokens) + max_new_tokens (",
                                                   o.max_new_tokens, ") = ", total,
                                                   " exceeds the context limit ", max_context));
  }
  if (o.page_size < 1) return absl::InvalidArgumentError(absl::StrCat("page_size must be >= 1, got ", o.page_size));
  if (o.prefill_chunk < 1) {
    return absl::InvalidArgumentError(absl::StrCat("prefill_chunk must be >= 1, got ", o.prefill_chunk));
  }
  for (int32_t id : o.stop_token_ids) {
    if (id < 0 || id >= model.config.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("stop token id ", id, " is outside [0, ",
                                                     model.config.vocab_size, ")"));
    }
  }
  if (absl::Status st = ValidateCompressionSettings(o.compression, model.config.n_layers); !st.ok()) return st;
  return ValidateSamplingParams(o.sampling, static_cast<int32_t>(model.config.vocab_size));
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
  const ModelConfig& c = model.config;
  const int64_t prompt_len = static_cast<int64_t>(prompt.size());
  std::unique_ptr<SequenceCompressor> compressor;
  if (o.compression.active() && !backend.HostMemory() && !DeviceSelectionFor(o.compression)) {
    // Only SnapKV-scored policies have device kernels; the others read the pages on the host.
    return absl::UnimplementedError(absl::StrCat("KV compression --kv-policy ", o.compression.policy,
                                                 " runs on the CPU backend only (snapkv, pyramid and criticalkv "
                                                 "also run on CUDA); use --device cpu"));
  }
  if (o.compression.active()) {
    auto made = SequenceCompressor::Create(model, o.compression, prompt_len, o.max_new_tokens, o.page_size,
                                           o.prefill_chunk);
    if (!made.ok()) return made.status();
    compressor = *std::move(made);
  }
  if (absl::Status st = CheckKvDType(o.kv_dtype, backend); !st.ok()) return st;
  PagePoolShape shape{0, o.page_size, c.n_kv_heads, c.head_dim, o.kv_dtype};
  shape.num_pages = compressor ? compressor->PeakPages()
                               : PeakPagesForRequest(prompt_len, o.max_new_tokens, o.page_size, c.n_layers);
  PagePool pool(shape, &backend);
  SequenceKv seq(c.n_layers);
  QueryWindow* window = compressor ? compressor->window() : nullptr;
  // Compresses what is due after a step; a no-op with the full cache.
  auto after_step = [&](bool prompt_done) {
    return compressor ? compressor->AfterStep(backend, pool, seq, prompt_done) : absl::OkStatus();
  };
  LlamaForward forward(model, backend, pool);
  Sampler sampler(o.sampling);
  StopMatcher stops(o.stop_sequences);
  StreamingDetokenizer detok(tokenizer);
  GenerationResult result;
  std::vector<int32_t> history(prompt.begin(), prompt.end());
  std::vector<float> logits;

  auto emit = [&](const std::string& piece) {
    if (piece.empty()) return;
    result.text += piece;
    if (on_text) on_text(piece);
  };

  const auto t0 = Clock::now();
  int64_t pos = 0;
  while (pos < static_cast<int64_t>(prompt.size())) {
    // A compressor's step may carry a probe of the question after the chunk (chunk mode).
    const SequenceCompressor::PrefillStep chunk =
        SequenceCompressor::NextPrefillOf(compressor.get(), prompt, pos, o.prefill_chunk, seq);
    const int64_t n = chunk.prompt_tokens;
    logits.clear();
    ForwardRequest req{chunk.tokens, pos, &seq, false, window};
    if (absl::Status st = forward.Step({&req, 1}, &logits); !st.ok()) return st;
    pos += n;
    if (absl::Status st = after_step(pos == prompt_len); !st.ok()) return st;
  }
  const auto t1 = Clock::now();
  result.prefill_seconds = std::chrono::duration<double>(t1 - t0).count();

  bool stopped = false;
  for (int32_t step = 0; step < o.max_new_tokens && !stopped; ++step) {
    if (keep_logits) result.step_logits.push_back(logits);
    const int32_t id = sampler.Sample(logits, history);
    if (!o.ignore_eos && tokenizer.IsEndOfGeneration(id)) {
      result.finish_reason = FinishReason::kEos;
      break;
    }
    result.tokens.push_back(id);
    history.push_back(id);
    if (std::find(o.stop_token_ids.begin(), o.stop_token_ids.end(), id) != o.stop_token_ids.end()) {
      result.finish_reason = FinishReason::kStopToken;
      break;
    }
    StopMatcher::Result r = stops.Push(detok.Push(id));
    emit(r.emit);
    if (r.stopped) {
      result.finish_reason = FinishReason::kStopSequence;
      stopped = true;
      break;
    }
    if (step + 1 == o.max_new_tokens) break;  // no forward pass for a token we won't sample
    logits.clear();
    ForwardRequest req{absl::MakeConstSpan(&result.tokens.back(), 1), pos, &seq, false, window};
    if (absl::Status st = forward.Step({&req, 1}, &logits); !st.ok()) return st;
    ++pos;
    if (absl::Status st = after_step(true); !st.ok()) return st;
  }
  if (!stopped) {
    StopMatcher::Result r = stops.Push(detok.Flush());
    emit(r.emit);
    if (r.stopped) {
      result.finish_reason = FinishReason::kStopSequence;
    } else {
      emit(stops.Flush());
    }
  }
  result.decode_seconds = std::chrono::duration<double>(Clock::now() - t1).count();
  if (compressor) result.compression = compressor->stats();
  result.peak_kv_pages = pool.stats().pages_peak;
  result.peak_kv_bytes = result.peak_kv_pages * PagePool::PageBytes(shape);
  for (int64_t len : seq.layer_len) result.kv_slots_at_end += len;
  seq.Release(pool);
  return result;
}

}  // namespace kvserve
