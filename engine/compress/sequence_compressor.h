// One sequence's KV compression: its per-layer quotas, its query window, when each layer
// is due (after the prompt, after each prefill chunk, or a page past its quota in decode),
// and what it costs. The scheduler and the single-sequence generator both drive it.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/compress/compressibility.h"
#include "engine/compress/compression_settings.h"
#include "engine/compress/layer_compressor.h"
#include "engine/compress/merge_reduce.h"
#include "engine/kv/query_window.h"
#include "engine/kv/page_pool.h"
#include "engine/model/model_weights.h"
#include "kernels/backend.h"

namespace kvserve {

class SequenceCompressor {
 public:
  // settings must be active (policy != full). prefill_chunk bounds the tokens one prefill
  // step adds, which sizes the chunk mode's peak.
  static absl::StatusOr<std::unique_ptr<SequenceCompressor>> Create(const Model& model,
                                                                    const CompressionSettings& settings,
                                                                    int64_t prompt_len, int64_t max_new_tokens,
                                                                    int64_t page_size, int64_t prefill_chunk);

  ~SequenceCompressor();

  // Where the forward pass records this sequence's queries.
  QueryWindow* window() { return &window_; }
  const std::vector<int64_t>& quotas() const { return quotas_; }

  // The most pages the sequence can hold at once (what admission reserves).
  int64_t PeakPages() const;
  // The most pages it can hold once the prompt is in and compressed.
  int64_t DecodePeakPages() const;

  // One prefill step of this sequence. With question scoring in chunk mode (ProbesQuestion),
  // a mid-prompt chunk that will be compressed is followed in the same step by a probe: the
  // question's tokens (the prompt's last question tokens), run as if they came right after
  // the chunk (at the question's own positions for question_at_end: probe_start_pos), so the
  // window holds the question's queries when AfterStep scores the cache.
  // AfterStep then drops the probe's entries; the question is prefilled for good at its true
  // position when the prompt gets there.
  struct PrefillStep {
    absl::Span<const int32_t> tokens;  // what the forward step runs, from position `cached`
    int64_t prompt_tokens = 0;         // of those, the prompt tokens cached for good (a prefix)
    int64_t probe_tokens = 0;          // the probe: the tokens after those
    int64_t probe_start_pos = 0;       // the probe's first position (ForwardRequest::tail_start_pos)
  };
  // The step at `cached` prompt tokens running at most max_tokens tokens (at least one prompt
  // token, so a max_tokens below the probe's length still progresses). tokens is valid until
  // the next call. The step must be followed by AfterStep.
  PrefillStep NextPrefill(absl::Span<const int32_t> prompt, int64_t cached, int64_t max_tokens,
                          const SequenceKv& seq);
  // The step of a sequence without a probe (or without compression): the next
  // min(max_tokens, rest) prompt tokens, at least one.
  static PrefillStep PlainPrefill(absl::Span<const int32_t> prompt, int64_t cached, int64_t max_tokens);
  // comp's NextPrefill, or PlainPrefill for a sequence without compression (comp null).
  static PrefillStep NextPrefillOf(SequenceCompressor* comp, absl::Span<const int32_t> prompt, int64_t cached,
                                   int64_t max_tokens, const SequenceKv& seq);
  // True when mid-prompt chunks are scored by a probe of the question.
  bool ProbesQuestion() const { return probes_question_; }
  // Tokens of the question a probe runs (0 without probes).
  int64_t question_tokens() const { return probes_question_ ? question_len_ : 0; }

  // Call after each forward step that appended to seq. prompt_done: the whole prompt is in
  // the cache. Compacts every layer that is due; once the prompt is compressed, shrinks the
  // sequence's reservation to DecodePeakPages so the freed pages serve other requests.
  absl::Status AfterStep(Backend& backend, PagePool& pool, SequenceKv& seq, bool prompt_done);

  const CompressionStats& stats() const { return stats_; }
  // Follows which prompt positions each layer's KV heads keep (a diagnostic for kvserve eval;
  // scoring policies only: merge-reduce merges entries rather than keeping them). Call it
  // before the sequence's first compression.
  void TrackKeptPositions();
  // The positions followed since TrackKeptPositions (null before it).
  const KeptPositions* kept_positions() const { return kept_positions_.get(); }
  // How compressible the prompt looked (filled once the whole prompt is in; see
  // compressibility.h).
  const CompressibilityEstimate& compressibility() const { return compressibility_; }
  // Merge-reduce's bucket state (null unless the policy is mergereduce:*).
  const MergeReduce* merge_reduce() const { return merge_reduce_.get(); }
  // Tokens per layer the sequence keeps, averaged over layers (with auto:RISK, what the
  // estimate picked once the prompt is in).
  double mean_quota() const;
  // The estimate's risk (CompressibilityEstimate::RiskAt) at the entries each layer keeps;
  // 0 before the prompt is in.
  double EstimatedRisk() const;

 private:
  SequenceCompressor(const Model& model, const CompressionSettings& s, std::unique_ptr<KvPolicy> policy,
                     std::vector<int64_t> quotas, int64_t prompt_len, int64_t max_new, int64_t page_size,
                     int64_t prefill_chunk);
  // probe: the trailing slots of layer l that a question probe left (never kept). mid_prompt:
  // a chunk-mode compression before the prompt's end, which keeps MidPromptKeep entries.
  absl::Status CompressLayer(Backend& backend, PagePool& pool, SequenceKv& seq, int64_t l, int64_t probe,
                             bool mid_prompt);
  int64_t PagesFor(int64_t slots) const { return (slots + page_size_ - 1) / page_size_; }
  // Merge-reduce, the compressibility estimate and the auto budget
  // (sequence_compressor_merge_reduce.cc). SetUpMergeReduce runs once from Create.
  void SetUpMergeReduce();
  void BuildMergeReduce();
  // auto:RISK, once the estimate is in: quotas from the estimate, buckets to match.
  void ApplyAutoBudget();
  int64_t MergeReducePeakPages(bool decode_only) const;
  absl::Status MergeReduceStep(Backend& backend, PagePool& pool, SequenceKv& seq, bool prompt_done);
  void ObservePrompt(Backend& backend, PagePool& pool, const SequenceKv& seq, bool prompt_done, int64_t probe);
  // Chunk mode: whether a layer of len entries (after a step) is compressed now.
  bool ChunkDue(int64_t len, int64_t quota) const;
  // Chunk mode: the entries a mid-prompt compression leaves in a layer of this quota (the
  // quota itself when the headroom is one chunk, i.e. compression after every chunk).
  int64_t MidPromptKeep(int64_t quota) const;

  const Model& model_;
  CompressionSettings settings_;
  std::unique_ptr<KvPolicy> policy_;
  std::vector<int64_t> quotas_;
  int64_t prompt_len_, max_new_, page_size_, prefill_chunk_;
  bool probes_question_;
  int64_t question_len_;       // the question's tokens (the window's capacity when probing)
  // Chunk mode: entries a layer may hold above its quota before it is compressed (at least
  // prefill_chunk_, which means after every chunk).
  int64_t headroom_;
  int64_t pending_probe_ = 0;  // probe slots the last NextPrefill appended to every layer
  std::vector<int32_t> step_tokens_;  // scratch: chunk + probe
  QueryWindow window_;
  bool prompt_compressed_ = false;
  CompressionStats stats_;
  std::vector<float> window_rows_;  // scratch
  // mergereduce:*: the bucket state that replaces quota-triggered selection.
  std::unique_ptr<MergeReduce> merge_reduce_;
  // The prompt's key moments, fed after each prefill step; estimated_len_[l] is the slots
  // of layer l the estimator has seen (the layer's length after the last step).
  std::unique_ptr<CompressibilityEstimator> estimator_;
  std::vector<int64_t> estimated_len_;
  CompressibilityEstimate compressibility_;
  // Scoring, selection and compaction of one layer, wherever the pool is (layer_compressor.h),
  // made with the backend of the first layer compressed; null for merge-reduce.
  std::unique_ptr<LayerCompressor> layers_;
  std::unique_ptr<KeptPositions> kept_positions_;
};

}  // namespace kvserve
