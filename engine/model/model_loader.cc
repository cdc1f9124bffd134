// Chooses the loader for a --model spec: random preset, Hugging Face folder, or GGUF file.
#include "engine/model/model_loader.h"

#include <filesystem>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace kvserve {

absl::StatusOr<Model> LoadModel(const std::string& spec) {
  if (spec.empty()) return absl::InvalidArgumentError("--model is empty");
  if (absl::StartsWith(spec, "random:")) {
    std::vector<std::string> parts = absl::StrSplit(spec, ':');
    uint64_t seed = 0;
    if (parts.size() > 3 || parts[1].empty() ||
        (parts.size() == 3 && !absl::SimpleAtoi(parts[2], &seed))) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad random model spec '", spec, "': expected random:<preset>[:<seed>]"));
    }
    return MakeRandomModel(parts[1], seed);
  }
  std::error_code ec;
  if (std::filesystem::is_directory(spec, ec)) return LoadHfModel(spec);
  if (!std::filesystem::exists(spec, ec)) {
    return absl::NotFoundError(absl::StrCat("model file '", spec, "' does not exist"));
  }
  return LoadGgufModel(spec);
}

}  // namespace kvserve
