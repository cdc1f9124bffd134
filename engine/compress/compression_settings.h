// The KV compression one sequence runs with, resolved (kv_settings.h makes it from a request,
// the flags or an eval row), its check, the name tables, and the policy it names.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/budget/layer_budget.h"
#include "engine/budget/quota_plan.h"
#include "engine/budget/ripple_plan.h"
#include "engine/budget/ripple_profile.h"
#include "engine/compress/kv_policy.h"

namespace kvserve {

// When the prompt's cache is compressed: once after the whole prompt (as in the papers),
// or after every prefill chunk (bounds a long prompt's peak to budget + chunk).
enum class CompressAt { kPrefillEnd, kChunk };
// The one table of compress-at names ("prefill_end", "chunk"), in CompressAt's order.
absl::Span<const std::string_view> CompressAtNames();
std::string_view CompressAtName(CompressAt at);

// What scores the cache after a mid-prompt chunk (compress_at chunk, policies that score with
// queries). kQuestion: the question's queries (a served prompt arrives whole, so its question
// is known before the first chunk), computed as if the question came right after the chunk.
// kQuestionAtEnd: the same probe at the question's own positions, so RoPE gives each entry the
// distance the real question will see it at; at 4K tokens it keeps more deep needles but
// gives every answer less likelihood (docs/QUALITY.md), so it is not the default.
// kWindow: the chunk's own last queries (in a long document, filler).
enum class ChunkScoring { kQuestion, kWindow, kQuestionAtEnd };
// Whether the scoring runs a probe of the question.
inline bool ProbesWithQuestion(ChunkScoring s) { return s != ChunkScoring::kWindow; }
// The one table of chunk-scoring names ("question", "window", "question_at_end"), in
// ChunkScoring's order.
absl::Span<const std::string_view> ChunkScoringNames();
std::string_view ChunkScoringName(ChunkScoring scoring);

// What becomes of the weight of the entries a selection evicts. kDrop: nothing stands for
// them (the papers' SnapKV and CriticalKV). kMerge: each adds its weight to the kept entry
// of its KV head with the nearest key (Backend::MergeEvictedWeights), so the kept entries
// stand for the whole prompt in every later softmax, as merge-reduce's do (DESIGN.md,
// method 3). kMergeNear: the same, but an evicted entry whose nearest kept key is farther
// than kMergeNearRadius times its own key's norm is dropped: merging unlike keys let a kept
// distractor speak for the filler around it (multikey at 4K lost 7 of the full cache's 36
// answers under kMerge; docs/QUALITY.md, twenty-third session). kMergeValues: kMergeNear's
// weights, and each kept entry's value becomes the weighted mean of the values merged into
// it, so the entry that stands for its neighbours in the softmax also says what they said
// (under kMergeNear it speaks for them with its own value). kMergeMid: kMergeNear at chunk
// mode's mid-prompt cuts, and drop at the prompt's end and after it: a single 90% cut at a 2K
// prompt's end lost multikey answers under kMergeNear that drop kept (docs/QUALITY.md,
// thirty-third session), while at mid-prompt cuts merging kept as many or more. Scoring
// policies only; merge-reduce weights its own entries.
enum class EvictedWeight { kDrop, kMerge, kMergeNear, kMergeValues, kMergeMid };
// ||a - b|| <= 0.5 ||a||: the nearest kept key within half the evicted key's length.
inline constexpr float kMergeNearRadius = 0.5f;
// The one table of evicted-weight names ("drop", "merge", "merge-near", "merge-values",
// "merge-mid"), in EvictedWeight's order.
absl::Span<const std::string_view> EvictedWeightNames();
std::string_view EvictedWeightName(EvictedWeight w);
// Whether a cut under w merges the evicted weight (mid_prompt: a chunk-mode cut before the
// prompt's end, SelectionRequest::mid_prompt).
bool MergesAt(EvictedWeight w, bool mid_prompt);
// The radius MergeEvictedWeights takes for w (kMerge: +inf); w must not be kDrop.
float MergeRadius(EvictedWeight w);
// Whether w merges values as well as weights (MergeEvictedWeights's merge_values).
bool MergesValues(EvictedWeight w);

// Most tokens a question span (and the observation window) may have.
inline constexpr int64_t kMaxScoringQueries = 4096;

// The one table of policy names, in the order help texts and metrics list them.
const std::vector<std::string>& KvPolicyNames();

struct CompressionSettings {
  std::string policy = "full";      // one of KvPolicyNames()
  double budget = 0.2;              // fraction of the prompt (<= 1) or tokens per layer (> 1)
  // > 0: --kv-budget auto:RISK; the budget is picked per request at the end of the prompt,
  // the smallest whose estimated risk is at most this (auto_budget.h). Needs prefill_end.
  double auto_risk = 0;
  std::optional<BudgetPlan> plan;   // unset: pyramid for the pyramid policy, else uniform (PlanOf)
  CompressAt at = CompressAt::kPrefillEnd;
  ChunkScoring chunk_scoring = ChunkScoring::kQuestion;
  // The question: the prompt's last question_tokens tokens (compress_at chunk with question
  // scoring only). Unset: the last `window` tokens.
  std::optional<int64_t> question_tokens;
  // compress_at chunk: how many entries a layer may hold above its budget during the prompt;
  // less than the prefill chunk means the prefill chunk (compress to the budget after every
  // chunk). Peak KV is budget + this. Mid-prompt compressions keep budget + (this - chunk) / 2
  // (SequenceCompressor::MidPromptKeep), the prompt's end the budget. Fewer compressions, and
  // later chunks encoded over more than the budget, keep what a question needs: at 4K tokens
  // and a 10% budget, 2048 keeps 49 of 50 passkeys where compressing after every 512-token
  // chunk keeps 43 (docs/QUALITY.md); at 128K it adds 2048 entries per layer to a 13K budget.
  int64_t chunk_headroom = 2048;
  // Unset: EvictedWeightOf's default (merge-mid in chunk mode with SnapKV or CriticalKV).
  std::optional<EvictedWeight> evicted_weight;
  double first_stage_ratio = 0.5;   // CriticalKV
  // The observation window (in queries) and SnapKV's average pool. Not kvpress's 64 and 5 (its
  // goldens set those): a short question after a long prompt is its last ~16 tokens, and a
  // 64-query window scores with the filler before it; a pool of 5 keeps 2 entries either side
  // of what the question attends to, the first digits of a number, so SnapKV read back
  // ' 921013.' for 9210138 and answered 0 of 5 passkeys at 1K. Every cell of the reach in
  // docs/QUALITY.md was measured with 16 and 31 (with 21 too; neither pool wins every cell).
  // Small selections run a narrower pool (PoolKernelFor, snapkv_policy.h).
  int64_t window = 16;
  int64_t pool_kernel = 31;
  // Merge-reduce: the newest entries it never reduces. Kept at 64 when the observation window
  // went to 16: with 16, mergereduce:cluster's logits moved 14% between f16 and f32 K/V (more
  // of the cache merged, so rounding compounds); --kv-window sets both.
  int64_t recent_window = 64;
  // The prompt's first entries every selection keeps (attention sinks; with more, the
  // instruction a long prompt opens with). Unset: SinkTokens' per-policy default.
  std::optional<int64_t> n_sink;
  // Merge-reduce (mergereduce:random|cluster): principal directions the clustering protects
  // (capped at head_dim), and the seed of the random reducer's draws.
  int64_t reduce_protected_dims = 128;
  uint64_t reduce_seed = 0;
  std::vector<int64_t> layer_quota; // explicit tokens per layer; overrides budget and plan
  // The server's RippleKV profile (checked against the model when loaded); plan "ripple"
  // needs it.
  std::shared_ptr<const RippleProfile> ripple;
  RippleParams ripple_params;

  bool active() const { return policy != "full"; }
};

// The sinks s keeps: n_sink when set, else 4 for streaming and merge-reduce (which are built
// around them) and 0 for the scoring policies (their figures and the kvpress goldens were
// measured without forced entries).
int64_t SinkTokens(const CompressionSettings& s);

// mergereduce:random or mergereduce:cluster: compressed by merge-reduce buckets while the
// sequence is read (engine/compress/merge_reduce.h) rather than by quota-triggered selection.
bool IsMergeReducePolicy(std::string_view policy);
// The protected directions a mergereduce:cluster request uses.
int64_t ReduceProtectedDims(const CompressionSettings& s);

// The budget plan the settings run: their own, else pyramid for the pyramid policy, else uniform.
BudgetPlan PlanOf(const CompressionSettings& s);
// The evicted weight the settings run: their own, else merge-mid for SnapKV and CriticalKV
// in chunk mode, else drop. Chunk mode cuts the prompt several times, and each entry merged
// into a like kept key at a mid-prompt cut keeps its share of attention until the question
// arrives: at a 10% budget merging (merge-near) kept at least as many of the full cache's
// answers as drop on every cell measured at 4K and 8K (docs/QUALITY.md, twenty-third to
// twenty-seventh sections). At the prompt's end the question's own queries choose what stays,
// and merging there cost answers: a 2K prompt, cut only there, lost 4 and 2 multikey answers
// under merge-near that drop (and prefill_end) kept (thirty-third and thirty-fourth sections).
// At prefill_end (one cut) merge-near changed no answer on passkey at 8K, so the papers' drop
// stays there; the other policies were not measured with a merge.
EvictedWeight EvictedWeightOf(const CompressionSettings& s);
// What engine/budget's QuotasFor reads of the settings (a view of s).
BudgetSpec BudgetOf(const CompressionSettings& s);

// ValidateKvSettings (kv_settings.h) of every value, plus what the plan needs (a ripple
// profile of n_layers layers) and a policy's plan (pyramid's is pyramid). INVALID_ARGUMENT
// naming the knob and value.
absl::Status ValidateCompressionSettings(const CompressionSettings& s, int64_t n_layers);

// The selection policy the settings name (pyramid selects like SnapKV).
absl::StatusOr<std::unique_ptr<KvPolicy>> MakeKvPolicy(const CompressionSettings& s);

}  // namespace kvserve
