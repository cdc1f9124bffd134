// What a request asks of KV compression, its validation, and the policy it names.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/budget/layer_budget.h"
#include "engine/budget/ripple_plan.h"
#include "engine/budget/ripple_profile.h"
#include "engine/compress/kv_policy.h"

namespace kvserve {

// When the prompt's cache is compressed: once after the whole prompt (as in the papers),
// or after every prefill chunk (bounds a long prompt's peak to budget + chunk).
enum class CompressAt { kPrefillEnd, kChunk };
absl::StatusOr<CompressAt> ParseCompressAt(std::string_view name);
std::string_view CompressAtName(CompressAt at);

// What scores the cache after a mid-prompt chunk (compress_at chunk, policies that score with
// queries): the question's queries, computed as if the question came right after the chunk
// (a served prompt arrives whole, so its question is known before the first chunk), or the
// chunk's own last queries (the window, which in a long document are filler).
enum class ChunkScoring { kQuestion, kWindow };
absl::StatusOr<ChunkScoring> ParseChunkScoring(std::string_view name);
std::string_view ChunkScoringName(ChunkScoring scoring);

// Most tokens a question span (and the observation window) may have.
inline constexpr int64_t kMaxScoringQueries = 4096;

// Every --kv-policy name, in the order help texts and metrics list them.
const std::vector<std::string>& KvPolicyNames();

struct CompressionSettings {
  std::string policy = "full";      // one of KvPolicyNames()
  double budget = 0.2;              // fraction of the prompt (<= 1) or tokens per layer (> 1)
  // > 0: --kv-budget auto:RISK; the budget is picked per request at the end of the prompt,
  // the smallest whose estimated risk is at most this (auto_budget.h). Needs prefill_end.
  double auto_risk = 0;
  std::string plan;                 // uniform|pyramid|ripple; empty: pyramid for "pyramid", else uniform
  CompressAt at = CompressAt::kPrefillEnd;
  ChunkScoring chunk_scoring = ChunkScoring::kQuestion;
  // The question: the prompt's last question_tokens tokens (compress_at chunk with question
  // scoring only). Unset: the last `window` tokens.
  std::optional<int64_t> question_tokens;
  double first_stage_ratio = 0.5;   // CriticalKV
  int64_t window = 64;              // observation window, in queries
  int64_t pool_kernel = 5;          // SnapKV average pool
  int64_t n_sink = 4;               // first tokens StreamingLLM and merge-reduce always keep
  // Merge-reduce (mergereduce:random|cluster): principal directions the clustering protects
  // (0 = 128, capped at head_dim), and the seed of the random reducer's draws.
  int64_t reduce_protected_dims = 0;
  uint64_t reduce_seed = 0;
  std::vector<int64_t> layer_quota; // explicit tokens per layer; overrides budget and plan
  // The server's RippleKV profile (checked against the model when loaded); plan "ripple"
  // needs it.
  std::shared_ptr<const RippleProfile> ripple;
  RippleParams ripple_params;

  bool active() const { return policy != "full"; }
};

// mergereduce:random or mergereduce:cluster: compressed by merge-reduce buckets while the
// sequence is read (engine/compress/merge_reduce.h) rather than by quota-triggered selection.
bool IsMergeReducePolicy(std::string_view policy);
// The protected directions a mergereduce:cluster request uses (the default resolved).
int64_t ReduceProtectedDims(const CompressionSettings& s);

// How eval names a row: "snapkv" sets the policy; "criticalkv@ripple" also sets the budget
// plan; a "/MODE" suffix sets when it compresses: prefill_end, chunk (= chunk:question) or
// chunk:window. INVALID_ARGUMENT for an unknown mode.
absl::Status ApplyPolicySpec(std::string_view spec, CompressionSettings* s);

// INVALID_ARGUMENT naming the field and value.
absl::Status ValidateCompressionSettings(const CompressionSettings& s, int64_t n_layers);

// The selection policy the settings name (pyramid selects like SnapKV).
absl::StatusOr<std::unique_ptr<KvPolicy>> MakeKvPolicy(const CompressionSettings& s);

// Tokens each layer keeps for a prompt of prompt_len tokens (ripple quotas are whole pages).
std::vector<int64_t> QuotasFor(const CompressionSettings& s, int64_t n_layers, int64_t prompt_len, int64_t page_size);

}  // namespace kvserve
