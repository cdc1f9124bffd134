// The names of the eval tasks and their parsing.
#include "engine/offline/eval_task.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace kvserve {

absl::StatusOr<EvalTask> ParseEvalTask(std::string_view name) {
  if (name == "kl") return EvalTask::kKl;
  if (name == "passkey") return EvalTask::kPasskey;
  if (name == "multikey") return EvalTask::kMultikey;
  if (name == "multivalue") return EvalTask::kMultivalue;
  if (name == "vartrack") return EvalTask::kVariableTracking;
  return absl::InvalidArgumentError(absl::StrCat("unknown eval task '", std::string(name),
                                                 "' (expected kl, passkey, multikey, multivalue or vartrack)"));
}

std::string_view EvalTaskName(EvalTask task) {
  switch (task) {
    case EvalTask::kKl: return "kl";
    case EvalTask::kPasskey: return "passkey";
    case EvalTask::kMultikey: return "multikey";
    case EvalTask::kMultivalue: return "multivalue";
    case EvalTask::kVariableTracking: return "vartrack";
  }
  return "?";
}

}  // namespace kvserve
