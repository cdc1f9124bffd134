// The KV compression flags shared by generate, bench, eval and serve.
#pragma once
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/compress/compression_settings.h"
#include "server/cli_args.h"

namespace kvserve {

// --kv-policy, --kv-budget, --kv-plan, --compress-at, --kv-window, --first-stage-ratio,
// --pool-kernel, --sink-tokens.
const std::vector<std::string>& KvFlagNames();
// One usage line per flag, for --help.
const char* KvFlagsHelp();

// The settings the flags describe (defaults where absent); errors name the flag and value.
absl::StatusOr<CompressionSettings> CompressionFromArgs(const CliArgs& args, int64_t n_layers);

}  // namespace kvserve
