// cuBLASLt GEMM. Row-major y[m, n] = x[m, k] w[n, k]^T is, in cuBLAS's column-major terms,
// y^T[n, m] = op(W)[n, k] x^T[k, m] with W stored as a [k, n] column-major matrix and op = T.
// One plan (descriptors + heuristic algorithm) per shape, cached.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gemm.h"

namespace kvserve::cuda {

Gemm::Gemm() {
  KVSERVE_CUBLAS_CHECK(cublasLtCreate(&handle_));
  KVSERVE_CUDA_CHECK(cudaMalloc(&workspace_, workspace_bytes_));
}

Gemm::~Gemm() {
  for (auto& [key, p] : plans_) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.c);
    cublasLtMatmulDescDestroy(p.op);
  }
  cudaFree(workspace_);
  cublasLtDestroy(handle_);
}

const Gemm::Plan& Gemm::PlanFor(int64_t m, int64_t n, int64_t k, cudaDataType_t y_type) {
  const auto key = std::make_tuple(m, n, k, static_cast<int>(y_type));
  if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  Plan p;
  KVSERVE_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  KVSERVE_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a)));
  KVSERVE_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b)));
  KVSERVE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, k, n, k));  // W as [k, n]
  KVSERVE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16BF, k, m, k));  // x^T [k, m]
  KVSERVE_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, y_type, n, m, n));        // y^T [n, m]
  cublasLtMatmulPreference_t pref = nullptr;
  KVSERVE_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  KVSERVE_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                            &workspace_bytes_, sizeof(workspace_bytes_)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  KVSERVE_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle_, p.op, p.a, p.b, p.c, p.c, pref, 1, &result, &found));
  cublasLtMatmulPreferenceDestroy(pref);
  if (found == 0) {
    std::fprintf(stderr, "kvserve: cuBLASLt has no algorithm for m=%lld n=%lld k=%lld\n",
                 static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k));
    std::abort();
  }
  p.algo = result.algo;
  return plans_.emplace(key, p).first->second;
}

void Gemm::Run(const __nv_bfloat16* w, const __nv_bfloat16* x, void* y, cudaDataType_t y_type, int64_t m,
               int64_t n, int64_t k, cudaStream_t stream) {
  if (m <= 0 || n <= 0) return;
  const Plan& p = PlanFor(m, n, k, y_type);
  const float alpha = 1.0f, beta = 0.0f;
  KVSERVE_CUBLAS_CHECK(cublasLtMatmul(handle_, p.op, &alpha, w, p.a, x, p.b, &beta, y, p.c, y, p.c, &p.algo,
                                      workspace_, workspace_bytes_, stream));
}

}  // namespace kvserve::cuda
