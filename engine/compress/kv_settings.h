// What a request, the command line or an eval row asks of KV compression, typed: each knob an
// enum or number, unset where the source left it to the defaults. One parser per source (the
// proto: server/serve/grpc_request.cc; the flags: server/serve/kv_flags.cc; an eval row's
// POLICY[@PLAN][/MODE]: ParsePolicySpec here), one check (ValidateKvSettings, naming each knob
// as its source spells it), one resolution over the defaults (ResolveKvSettings).
//
// A new knob: its proto field, a KvSettings member, a row of the knob table in kv_settings.cc,
// its line in ValidateKvSettings and ResolveKvSettings, and its read in each parser.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/budget/layer_budget.h"
#include "engine/budget/ripple_profile.h"
#include "engine/compress/compression_settings.h"

namespace kvserve {

// Who set the values, so an error names the knob as the user wrote it: "kv.window" (the
// GenerateRequest's field), "--kv-window" (the flag), or "KV window" (the engine's own).
enum class KvSource { kEngine, kProto, kFlags };

struct KvSettings {
  std::optional<std::string> policy;                // a name of KvPolicyNames()
  std::optional<double> budget;                     // fraction of the prompt (<= 1) or tokens per layer (> 1)
  std::optional<double> auto_risk;                  // budget auto:RISK (auto_budget.h); replaces `budget`
  std::optional<BudgetPlan> plan;
  std::optional<std::vector<int64_t>> layer_quota;  // tokens per layer; overrides budget and plan
  std::optional<CompressAt> compress_at;
  std::optional<ChunkScoring> chunk_scoring;
  std::optional<int64_t> question_tokens;           // the prompt's last N tokens are the question
  std::optional<int64_t> chunk_headroom;            // chunk mode: entries above the budget between compressions
  std::optional<EvictedWeight> evicted_weight;
  std::optional<double> first_stage_ratio;          // CriticalKV
  std::optional<int64_t> window;                    // observation window, in queries
  std::optional<int64_t> pool_kernel;               // SnapKV average pool
  std::optional<int64_t> reduce_protected_dims;     // mergereduce:cluster
  // Server-wide only (the command line's): a request takes the server's.
  std::optional<int64_t> sink_tokens;
  std::optional<double> ripple_r, ripple_gamma;
  std::shared_ptr<const RippleProfile> ripple_profile;  // plan ripple's profile
};

// The knobs' names as `source` spells them: "kv.compress_at", "--compress-at", "compress_at".
std::string_view KvKnobName(std::string_view knob, KvSource source);

// The named tables, parsed; INVALID_ARGUMENT naming the knob and the value and listing the names.
absl::StatusOr<std::string> ParseKvPolicy(std::string_view name, KvSource source = KvSource::kEngine);
absl::StatusOr<BudgetPlan> ParseKvBudgetPlan(std::string_view name, KvSource source = KvSource::kEngine);
absl::StatusOr<CompressAt> ParseCompressAt(std::string_view name, KvSource source = KvSource::kEngine);
absl::StatusOr<ChunkScoring> ParseChunkScoring(std::string_view name, KvSource source = KvSource::kEngine);
absl::StatusOr<EvictedWeight> ParseEvictedWeight(std::string_view name, KvSource source = KvSource::kEngine);

// How eval names a row: "snapkv" sets the policy; "criticalkv@ripple" also sets the budget
// plan; a "/MODE" suffix sets when it compresses: prefill_end, chunk (= chunk:question) or
// chunk:window; a last "+merge" or "+drop" the evicted weight ("snapkv/chunk+merge").
// INVALID_ARGUMENT for an unknown policy, plan, mode or evicted weight.
absl::StatusOr<KvSettings> ParsePolicySpec(std::string_view spec);

// Every set value in range, and the set values consistent with each other (a question span
// needs chunk mode with question scoring, auto:RISK excludes a fixed budget, ...); layer
// counts against n_layers when > 0. INVALID_ARGUMENT naming the knobs as `source` spells them.
absl::Status ValidateKvSettings(const KvSettings& kv, KvSource source, int64_t n_layers);

// The overrides over the defaults (a request's over the server's; the flags' over the built-in
// CompressionSettings). A budget replaces auto:RISK and the other way round. With no question
// span set and chunk mode with question scoring, a chat prompt's last turn of
// chat_question_tokens tokens (0: not a chat prompt) is the question when it has at most
// kMaxChatQuestionTokens.
CompressionSettings ResolveKvSettings(const KvSettings& kv, const CompressionSettings& defaults,
                                      int64_t chat_question_tokens = 0);

// The longest last chat turn (with the generation prompt) taken as the question by default.
inline constexpr int64_t kMaxChatQuestionTokens = 256;

}  // namespace kvserve
