// Device copies of host parameters, keyed by host address: weight matrices as bf16 (GGUF
// quantized types are dequantized on the host, then converted on the device), small fp32
// vectors (norm gains, biases, RoPE frequencies) as fp32. The host data must stay alive
// and unchanged while the cache is used (model weights are); the small vectors are also
// compared with a host copy on every use, so a reused address with new values is re-uploaded.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "kernels/backend.h"

namespace kvserve::cuda {

class WeightCache {
 public:
  explicit WeightCache(cudaStream_t stream) : stream_(stream) {}
  ~WeightCache();
  WeightCache(const WeightCache&) = delete;
  WeightCache& operator=(const WeightCache&) = delete;

  // [w.rows, w.cols] bf16, uploaded on first use.
  const __nv_bfloat16* Bf16(const WeightView& w);
  // host[n] as fp32 device memory.
  const float* F32(const float* host, int64_t n);
  int64_t device_bytes() const { return device_bytes_; }

 private:
  struct Small {
    std::vector<float> host;
    float* device = nullptr;
  };
  cudaStream_t stream_;
  std::map<std::tuple<const void*, DType, int64_t, int64_t>, __nv_bfloat16*> matrices_;
  std::map<std::pair<const float*, int64_t>, Small> small_;
  int64_t device_bytes_ = 0;
};

}  // namespace kvserve::cuda
