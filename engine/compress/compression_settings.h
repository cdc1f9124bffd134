// What a request asks of KV compression, its validation, and the policy it names.
#pragma once
#include <cstdint>
#include <memory>
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

struct CompressionSettings {
  std::string policy = "full";      // full|streaming|snapkv|criticalkv|pyramid|mergereduce:random|mergereduce:cluster
  double budget = 0.2;              // fraction of the prompt (<= 1) or tokens per layer (> 1)
  // > 0: --kv-budget auto:RISK; the budget is picked per request at the end of the prompt,
  // the smallest whose estimated risk is at most this (auto_budget.h). Needs prefill_end.
  double auto_risk = 0;
  std::string plan;                 // uniform|pyramid|ripple; empty: pyramid for "pyramid", else uniform
  CompressAt at = CompressAt::kPrefillEnd;
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

// "snapkv" sets the policy; "criticalkv@ripple" also sets the budget plan (how eval names
// a policy x plan row).
void ApplyPolicySpec(std::string_view spec, CompressionSettings* s);

// INVALID_ARGUMENT naming the field and value.
absl::Status ValidateCompressionSettings(const CompressionSettings& s, int64_t n_layers);

// The selection policy the settings name (pyramid selects like SnapKV).
absl::StatusOr<std::unique_ptr<KvPolicy>> MakeKvPolicy(const CompressionSettings& s);

// Tokens each layer keeps for a prompt of prompt_len tokens (ripple quotas are whole pages).
std::vector<int64_t> QuotasFor(const CompressionSettings& s, int64_t n_layers, int64_t prompt_len, int64_t page_size);

}  // namespace kvserve
