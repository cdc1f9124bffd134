// GEMMs through cuBLASLt: bf16 inputs, fp32 accumulation, fp32 or bf16 output.
#pragma once
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>

namespace kvserve::cuda {

class Gemm {
 public:
  Gemm();
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // y[m, n] = x[m, k] * w[n, k]^T, all row-major; y is CUDA_R_32F or CUDA_R_16BF.
  void Run(const __nv_bfloat16* w,  // [n, k]
           const __nv_bfloat16* x,  // [m, k]
           void* y,                 // [m, n]
           cudaDataType_t y_type, int64_t m, int64_t n, int64_t k, cudaStream_t stream);

 private:
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  const Plan& PlanFor(int64_t m, int64_t n, int64_t k, cudaDataType_t y_type);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = size_t{32} << 20;
  std::map<std::tuple<int64_t, int64_t, int64_t, int>, Plan> plans_;  // (m, n, k, y_type)
};

}  // namespace kvserve::cuda
