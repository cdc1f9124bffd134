// Raising a kernel's dynamic shared-memory limit above the 48 KB default. The attribute
// belongs to each device (and context), so it is set once per (device, kernel) rather than
// once per process, which would skip a second GPU; a mutex makes it safe from any thread.
#pragma once
#include <cuda_runtime.h>

#include <mutex>
#include <set>
#include <utility>

#include "kernels/cuda/cuda_check.h"

namespace kvserve::cuda {

template <typename Kernel>
void AllowDynamicSharedMemory(Kernel* kernel, size_t bytes) {
  static std::mutex mu;
  static std::set<std::pair<int, size_t>>* done = new std::set<std::pair<int, size_t>>();
  int device = 0;
  KVSERVE_CUDA_CHECK(cudaGetDevice(&device));
  const auto key = std::make_pair(device, reinterpret_cast<size_t>(kernel));
  std::lock_guard<std::mutex> lock(mu);
  if (done->count(key)) return;
  KVSERVE_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  done->insert(key);
}

}  // namespace kvserve::cuda
