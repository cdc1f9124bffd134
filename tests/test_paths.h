// Paths the tests need: the source tree (golden files) and the default model.
#pragma once
#include <cstdlib>
#include <string>

namespace kvserve::testing {

inline std::string SourcePath(const std::string& rel) {
  return std::string(KVSERVE_SOURCE_DIR) + "/" + rel;
}

// The default real model; scripts/test.sh fetches it before ctest runs.
inline std::string SmolLm2Path() {
  const char* p = std::getenv("KVSERVE_SMOLLM2_GGUF");
  return p ? p : SourcePath("models/SmolLM2-135M-Instruct.Q4_1.gguf");
}

}  // namespace kvserve::testing
