// The quality tasks `kvserve eval` runs: kl (natural text); passkey, multikey and multivalue
// (retrieval); vartrack (following a chain of variable assignments).
#pragma once
#include <string_view>

#include "absl/status/statusor.h"

namespace kvserve {

enum class EvalTask { kKl, kPasskey, kMultikey, kMultivalue, kVariableTracking };

// "kl", "passkey", "multikey", "multivalue" or "vartrack"; the error names the value.
absl::StatusOr<EvalTask> ParseEvalTask(std::string_view name);
std::string_view EvalTaskName(EvalTask task);

}  // namespace kvserve
