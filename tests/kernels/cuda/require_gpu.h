// KVSERVE_REQUIRE_GPU: set (to anything but "" or "0", e.g. 1) by a run on a GPU machine, it
// turns "no usable CUDA device" from a skip (checks) or a clean exit (benches) into a failure,
// so a run in which every check skipped cannot pass for one that ran on the GPU.
#pragma once
#include <cstdlib>
#include <string>

namespace kvserve {

inline bool GpuRequired() {
  const char* v = std::getenv("KVSERVE_REQUIRE_GPU");
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

}  // namespace kvserve
