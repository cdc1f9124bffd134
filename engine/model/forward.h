// Llama-family forward pass over a batch of sequences, on any Backend, with paged KV.
#pragma once
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/kv/page_pool.h"
#include "engine/kv/query_window.h"
#include "engine/model/model_weights.h"
#include "kernels/backend.h"
#include "kernels/backend_buffer.h"

namespace kvserve {

// One sequence's part of a step: new tokens appended to its cache.
struct ForwardRequest {
  absl::Span<const int32_t> tokens;  // new tokens, at positions start_pos, start_pos+1, ...
  int64_t start_pos = 0;             // tokens the sequence has seen before this step
  SequenceKv* kv = nullptr;
  bool all_logits = false;           // logits for every new token, else only for the last
  QueryWindow* window = nullptr;     // when set, receives each layer's post-RoPE queries
  // The last tail_tokens tokens run at positions tail_start_pos, tail_start_pos+1, ... instead
  // (a question probe placed where the question will be: RoPE sees the true distances; the
  // causal mask is by order in the step, so they still see every cached entry).
  int64_t tail_tokens = 0;
  int64_t tail_start_pos = 0;
};

class LlamaForward {
 public:
  LlamaForward(const Model& model, Backend& backend, PagePool& pool);

  // Runs one forward step. Appends logits rows [rows, vocab] to *logits: for each request
  // in order, one row per new token if all_logits, else one row for its last token.
  // Pages for the new tokens are taken first; if the pool cannot hold them the step fails
  // with RESOURCE_EXHAUSTED before anything is changed.
  absl::Status Step(absl::Span<const ForwardRequest> batch, std::vector<float>* logits);

  const Model& model() const { return model_; }

 private:
  absl::Status ReservePages(absl::Span<const ForwardRequest> batch);
  void Layer(int64_t l, int64_t n_tokens);

  const Model& model_;
  Backend& backend_;
  PagePool& pool_;
  std::vector<float> inv_freq_;  // [rope_dim / 2], scaling applied

  // Per-step scratch, sized to the step's token count. Activations live in the backend's
  // memory (device memory for a device backend); token ids and positions on the host.
  std::vector<int32_t> tokens_, positions_;
  BackendBuffer<float> x_, xn_, q_, k_, v_, attn_, gate_, up_, tmp_, logits_;
  std::vector<float> host_q_;  // post-RoPE queries copied out for a QueryWindow (device backends)
  // Per-layer CSR page tables of the step.
  std::vector<int32_t> q_indptr_, page_indptr_, page_indices_, kv_len_;
  absl::Span<const ForwardRequest> batch_;
};

// RoPE inverse frequencies [rope_dim / 2] with the config's scaling and optional per-pair
// divisors (GGUF rope_freqs) applied.
std::vector<float> RopeInverseFrequencies(const ModelConfig& config, const WeightView& freq_factors);

// Logits [tokens.size(), vocab] at every position of one sequence run with a full cache
// from position 0, its K/V stored as `kv_dtype`. For tests and tools; the engine uses
// LlamaForward directly.
absl::StatusOr<std::vector<float>> ComputeAllLogits(const Model& model, Backend& backend,
                                                    absl::Span<const int32_t> tokens,
                                                    DType kv_dtype = DType::kF32);

}  // namespace kvserve
