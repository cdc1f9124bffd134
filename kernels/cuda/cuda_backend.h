// CudaBackend: every Backend op on one CUDA device. Activations and KV pages are device
// memory (Allocate/CopyIn/CopyOut); weights are uploaded as bf16 on first use.
#pragma once
#include <cuda_runtime.h>

#include <memory>

#include "kernels/backend.h"

namespace kvserve {

// A backend on CUDA device `device`. The caller checks CudaDeviceCount() first.
std::unique_ptr<Backend> MakeCudaBackend(int device = 0);

// For tools and tests, on a backend made by MakeCudaBackend: the stream every op runs on,
// and greedy sampling on the device (argmax of each logits row; only the ids come back).
cudaStream_t CudaBackendStream(Backend& cuda_backend);
void CudaArgmaxRows(Backend& cuda_backend, const float* logits,  // device [rows, vocab]
                    int32_t* host_ids,                           // host [rows]
                    int64_t rows, int64_t vocab);
// Top-k sampling's candidates on the device: the k best of each row (value descending, equal
// values by lower id, NaN as -inf), ids and values copied back; for Sampler::SampleFromTopK.
// 1 <= k <= min(cuda::kTopKRowsMaxK (1024), vocab), else it aborts naming the bad value.
void CudaTopKRows(Backend& cuda_backend, const float* device_logits,  // device [rows, vocab]
                  int64_t rows, int64_t vocab, int64_t k,
                  int32_t* host_ids,  // host [rows, k]
                  float* host_vals);  // host [rows, k]

}  // namespace kvserve
