// Weight upload: bf16 as is; fp32 converted on the device; every other type dequantized on
// the host (the CPU reference DequantizeRow, rows in parallel) in chunks, then converted.
#include "kernels/cuda/weight_cache.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/dequantize.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"

namespace kvserve::cuda {
namespace {

constexpr int64_t kChunkElements = int64_t{32} << 20;  // 128 MiB of fp32 staging per chunk

}  // namespace

WeightCache::~WeightCache() {
  for (auto& [key, p] : matrices_) cudaFree(p);
  for (auto& [key, s] : small_) cudaFree(s.device);
}

const __nv_bfloat16* WeightCache::Bf16(const WeightView& w) {
  const auto key = std::make_tuple(w.data, w.dtype, w.rows, w.cols);
  if (auto it = matrices_.find(key); it != matrices_.end()) return it->second;
  const int64_t n = w.rows * w.cols;
  __nv_bfloat16* dst = nullptr;
  KVSERVE_CUDA_CHECK(cudaMalloc(&dst, sizeof(__nv_bfloat16) * std::max<int64_t>(n, 1)));
  device_bytes_ += static_cast<int64_t>(sizeof(__nv_bfloat16)) * n;
  if (w.dtype == DType::kBF16) {
    KVSERVE_CUDA_CHECK(cudaMemcpyAsync(dst, w.data, sizeof(__nv_bfloat16) * n, cudaMemcpyHostToDevice, stream_));
  } else {
    const int64_t rows_per_chunk = std::max<int64_t>(1, kChunkElements / std::max<int64_t>(1, w.cols));
    const int64_t chunk_rows = std::min(rows_per_chunk, w.rows);
    float* staging = nullptr;
    KVSERVE_CUDA_CHECK(cudaMalloc(&staging, sizeof(float) * std::max<int64_t>(1, chunk_rows * w.cols)));
    std::vector<float> host;
    const int64_t row_bytes = RowBytes(w.dtype, w.cols);
    for (int64_t r0 = 0; r0 < w.rows; r0 += chunk_rows) {
      const int64_t nr = std::min(chunk_rows, w.rows - r0);
      const float* src = static_cast<const float*>(w.data) + r0 * w.cols;
      if (w.dtype != DType::kF32) {
        host.resize(static_cast<size_t>(nr * w.cols));
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < nr; ++r) {
          DequantizeRow(w.dtype, static_cast<const uint8_t*>(w.data) + (r0 + r) * row_bytes,
                        host.data() + r * w.cols, w.cols);
        }
        src = host.data();
      }
      // From pageable memory the copy has consumed `src` when it returns, so `host` can be reused.
      KVSERVE_CUDA_CHECK(cudaMemcpyAsync(staging, src, sizeof(float) * nr * w.cols, cudaMemcpyHostToDevice, stream_));
      F32ToBf16(staging, dst + r0 * w.cols, nr * w.cols, stream_);
    }
    KVSERVE_CUDA_CHECK(cudaStreamSynchronize(stream_));
    KVSERVE_CUDA_CHECK(cudaFree(staging));
  }
  matrices_[key] = dst;
  return dst;
}

const float* WeightCache::F32(const float* host, int64_t n) {
  Small& s = small_[{host, n}];
  const size_t bytes = sizeof(float) * static_cast<size_t>(n);
  if (s.device && std::memcmp(s.host.data(), host, bytes) == 0) return s.device;
  if (!s.device) {
    KVSERVE_CUDA_CHECK(cudaMalloc(&s.device, std::max<size_t>(bytes, sizeof(float))));
    device_bytes_ += static_cast<int64_t>(bytes);
  }
  s.host.assign(host, host + n);
  KVSERVE_CUDA_CHECK(cudaMemcpyAsync(s.device, s.host.data(), bytes, cudaMemcpyHostToDevice, stream_));
  return s.device;
}

}  // namespace kvserve::cuda
