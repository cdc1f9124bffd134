// The KV compression flags shared by generate, bench and serve (eval takes the same names per row).
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/compress/compression_settings.h"
#include "engine/compress/kv_settings.h"
#include "engine/model/model_weights.h"
#include "kernels/backend.h"
#include "server/flags/cli_args.h"

namespace kvserve {

// --kv-policy, --kv-budget, --budget-plan, --compress-at, --kv-window, --first-stage-ratio,
// --pool-kernel, --sink-tokens, --ripple-r, --ripple-gamma, --reduce-protected-dims,
// --kv-dtype, --chunk-scoring, --question-tokens, --chunk-headroom, --evicted-weight.
const std::vector<std::string>& KvFlagNames();
// One usage line per flag, for --help (the names from the tables, the defaults from
// CompressionSettings).
const std::string& KvFlagsHelp();

// --kv-dtype f32|f16: the K/V storage of a pool in `backend`'s memory; without the flag,
// DefaultKvDType (f16 on the CPU, f32 on CUDA). The error names the value.
absl::StatusOr<DType> KvDTypeFromArgs(const CliArgs& args, const Backend& backend);
// `dtype` as --kv-dtype spells it ("f16"), for reports.
std::string_view KvDTypeFlagName(DType dtype);

// The settings the flags set (unset where absent): the flags' one parser, shared by generate,
// bench, serve and eval. Errors name the flag and value. --budget-plan ripple:PROFILE.json
// loads the profile and checks it was made for `model`.
absl::StatusOr<KvSettings> KvSettingsFromArgs(const CliArgs& args, const Model& model);

// KvSettingsFromArgs over the built-in defaults, checked: what generate, bench and serve run with.
absl::StatusOr<CompressionSettings> CompressionFromArgs(const CliArgs& args, const Model& model);

}  // namespace kvserve
