// --max-context, as generate and bench read it: the context limit in tokens, the model's
// trained context unless given.
#pragma once
#include <cstdint>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "server/flags/cli_args.h"

namespace kvserve {

// The limit; past the model's trained context it warns on stderr (RoPE positions there were
// never trained), and a malformed value is an error naming the flag.
absl::StatusOr<int64_t> MaxContextFromArgs(const CliArgs& args, const ModelConfig& config);

}  // namespace kvserve
