// The quality tasks `kvserve eval` runs: kl (natural text), passkey and multikey (retrieval).
#pragma once
#include <string_view>

#include "absl/status/statusor.h"

namespace kvserve {

enum class EvalTask { kKl, kPasskey, kMultikey };

// "kl", "passkey" or "multikey"; the error names the value.
absl::StatusOr<EvalTask> ParseEvalTask(std::string_view name);
std::string_view EvalTaskName(EvalTask task);

}  // namespace kvserve
