// A CUDA-event timer for the GPU benches.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "kernels/cuda/cuda_check.h"

namespace kvserve {

// Median milliseconds per call over `reps` samples of fn on stream, after one warm-up call.
// A sample times `calls` back-to-back calls between one pair of events and divides by
// `calls`: with calls > 1 the host work of a call (planning, launches, metadata upload)
// overlaps the device work of the previous ones, as in a model's layer loop, and the events'
// own resolution and overhead are spread over the calls. calls = 1 times single calls.
inline double CudaTimeMs(cudaStream_t stream, int reps, const std::function<void()>& fn, int calls = 1) {
  cudaEvent_t a, b;
  KVSERVE_CUDA_CHECK(cudaEventCreate(&a));
  KVSERVE_CUDA_CHECK(cudaEventCreate(&b));
  fn();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    KVSERVE_CUDA_CHECK(cudaEventRecord(a, stream));
    for (int c = 0; c < calls; ++c) fn();
    KVSERVE_CUDA_CHECK(cudaEventRecord(b, stream));
    KVSERVE_CUDA_CHECK(cudaEventSynchronize(b));
    float t = 0;
    KVSERVE_CUDA_CHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(static_cast<double>(t) / calls);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace kvserve
