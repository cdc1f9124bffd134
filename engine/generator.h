// Generation of one prompt, for the CLI, benchmarks and golden tests: a one-request run of
// the continuous-batching scheduler in a page pool of exactly the request's peak, so it
// prefills, compresses, samples and stops exactly as the server does.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/compress/compression_settings.h"
#include "engine/compress/sequence_compressor.h"
#include "engine/model/model_weights.h"
#include "engine/model/sampling_params.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/scheduler/request.h"
#include "kernels/backend.h"

namespace kvserve {

struct GenerationOptions {
  int32_t max_new_tokens = 128;
  SamplingParams sampling;
  std::vector<std::string> stop_sequences;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  int64_t page_size = 16;
  DType kv_dtype = DType::kF32;  // K/V storage (kF16 on a host backend only; the commands default to DefaultKvDType)
  int64_t prefill_chunk = 512;  // prompt tokens per forward step
  CompressionSettings compression;  // policy "full" keeps the whole cache
};

struct GenerationResult {
  std::vector<int32_t> tokens;       // generated ids (a stop token is included, EOS is not)
  std::vector<std::vector<float>> step_logits;  // only when keep_logits
  std::string text;                  // detokenized, cut before a matched stop sequence
  FinishReason finish_reason = FinishReason::kLength;
  double prefill_seconds = 0;
  double decode_seconds = 0;
  CompressionStats compression;      // zero when the full cache was kept
  int64_t peak_kv_pages = 0;         // most KV pages held at once
  int64_t peak_kv_bytes = 0;
  int64_t kv_slots_at_end = 0;       // KV slots held at the end, summed over layers
};

// Checks the compression settings, then the request (ValidateRequest); the message names the
// bad value.
absl::Status ValidateGeneration(const Model& model, absl::Span<const int32_t> prompt,
                                const GenerationOptions& options, int64_t max_context);

// Pages a page pool must hold for this generation alone (compressed peak when compressing).
int64_t PeakPagesForGeneration(const Model& model, int64_t prompt_len, const GenerationOptions& options);

// on_text receives the completion as it is produced (never a split UTF-8 character).
absl::StatusOr<GenerationResult> Generate(const Model& model, const Tokenizer& tokenizer,
                                          Backend& backend, absl::Span<const int32_t> prompt,
                                          const GenerationOptions& options,
                                          const std::function<void(std::string_view)>& on_text = {},
                                          bool keep_logits = false);

}  // namespace kvserve
