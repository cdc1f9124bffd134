// Detects a usable CUDA device; any CUDA error means "none" and the CPU backend is used.
#pragma once
#include <string>

namespace kvserve {

// Number of usable CUDA devices; on failure 0 and *why says what CUDA reported.
int CudaDeviceCount(std::string* why);

}  // namespace kvserve
