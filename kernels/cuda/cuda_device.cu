// Detects a usable CUDA device. Without a GPU the runtime reports an error (for example
// "driver version is insufficient"); that is "no device", not a failure.
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_device.h"

namespace kvserve {

int CudaDeviceCount(std::string* why) {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    if (why) *why = cudaGetErrorString(err);
    cudaGetLastError();  // clear the sticky error so later calls start clean
    return 0;
  }
  return n;
}

}  // namespace kvserve
