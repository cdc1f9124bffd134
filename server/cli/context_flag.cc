// --max-context for the CLI commands: the model's context unless given, a warning beyond it.
#include "server/cli/context_flag.h"

#include <cstdio>

namespace kvserve {

absl::StatusOr<int64_t> MaxContextFromArgs(const CliArgs& args, const ModelConfig& config) {
  absl::StatusOr<int64_t> max_context = args.GetInt("max-context", config.max_context);
  if (max_context.ok() && args.Has("max-context") && *max_context > config.max_context) {
    std::fprintf(stderr,
                 "kvserve: warning: --max-context %lld is beyond the model's trained context %lld; "
                 "RoPE positions past it were never seen in training and quality will degrade\n",
                 static_cast<long long>(*max_context), static_cast<long long>(config.max_context));
  }
  return max_context;
}

}  // namespace kvserve
