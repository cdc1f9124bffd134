// Error checks for CUDA runtime and cuBLAS calls, and after every kernel launch. The ops
// return void, so a CUDA error is fatal: it prints the call, file and line, then aborts.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

namespace kvserve::cuda {

inline void CheckCuda(cudaError_t err, const char* what, const char* file, int line) {
  if (err == cudaSuccess) return;
  std::fprintf(stderr, "kvserve: CUDA error %s (%s) in %s at %s:%d\n", cudaGetErrorName(err),
               cudaGetErrorString(err), what, file, line);
  std::abort();
}

inline void CheckCublas(cublasStatus_t st, const char* what, const char* file, int line) {
  if (st == CUBLAS_STATUS_SUCCESS) return;
  std::fprintf(stderr, "kvserve: cuBLAS error %d in %s at %s:%d\n", static_cast<int>(st), what, file, line);
  std::abort();
}

}  // namespace kvserve::cuda

#define KVSERVE_CUDA_CHECK(expr) ::kvserve::cuda::CheckCuda((expr), #expr, __FILE__, __LINE__)
#define KVSERVE_CUBLAS_CHECK(expr) ::kvserve::cuda::CheckCublas((expr), #expr, __FILE__, __LINE__)
// After every <<<...>>> launch: catches bad configurations at once (execution errors surface
// at the next synchronizing call, which is checked too).
#define KVSERVE_LAUNCH_CHECK() KVSERVE_CUDA_CHECK(cudaGetLastError())
