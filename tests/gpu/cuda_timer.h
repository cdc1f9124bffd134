// A CUDA-event timer for the GPU benches.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "kernels/cuda/cuda_check.h"

namespace kvserve {

// Median milliseconds of `reps` runs of fn on stream, after one warm-up.
inline double CudaTimeMs(cudaStream_t stream, int reps, const std::function<void()>& fn) {
  cudaEvent_t a, b;
  KVSERVE_CUDA_CHECK(cudaEventCreate(&a));
  KVSERVE_CUDA_CHECK(cudaEventCreate(&b));
  fn();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    KVSERVE_CUDA_CHECK(cudaEventRecord(a, stream));
    fn();
    KVSERVE_CUDA_CHECK(cudaEventRecord(b, stream));
    KVSERVE_CUDA_CHECK(cudaEventSynchronize(b));
    float t = 0;
    KVSERVE_CUDA_CHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace kvserve
