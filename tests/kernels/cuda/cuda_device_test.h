// The GPU checks' fixture: a CUDA backend on device 0 (or a skip saying why there is none --
// a failure instead when KVSERVE_REQUIRE_GPU=1 says this run is on a GPU machine) that moves
// vectors to and from device memory, freeing them after the test; and the relative error
// every check compares against its bound.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_device.h"
#include "tests/kernels/cuda/require_gpu.h"

namespace kvserve {

// max |got - want| / max |want| over elements [begin, end) (by default all): one number that
// reads the same for any output scale (infinite when the sizes differ).
inline double RelError(const std::vector<float>& got, const std::vector<float>& want, size_t begin = 0,
                       size_t end = static_cast<size_t>(-1)) {
  if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
  double num = 0, den = 1e-30;
  end = std::min(end, want.size());
  for (size_t i = begin; i < end; ++i) {
    num = std::max(num, std::fabs(static_cast<double>(got[i]) - want[i]));
    den = std::max(den, std::fabs(static_cast<double>(want[i])));
  }
  return num / den;
}

// A prompt of n token ids for a random-weight model (engine/model/random_model.h): spread over
// [0, vocab), stepping over the byte tokenizer's "<s>" (256) and "</s>" (257).
inline std::vector<int32_t> RandomModelPrompt(int64_t vocab, int64_t n, int64_t stride = 7919, int64_t offset = 13) {
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < n; ++i) {
    int64_t id = (i * stride + offset) % (vocab - 2);
    ids.push_back(static_cast<int32_t>(id < 256 ? id : id + 2));
  }
  return ids;
}

}  // namespace kvserve

// In a test body or SetUp: returns from it, skipping the test ("no CUDA device: <why>"), or
// failing it with the same message when GpuRequired(), if CUDA reports no usable device.
#define KVSERVE_SKIP_WITHOUT_CUDA_DEVICE()                                                          \
  do {                                                                                              \
    std::string kvserve_no_gpu_why;                                                                 \
    if (::kvserve::CudaDeviceCount(&kvserve_no_gpu_why) == 0) {                                     \
      if (::kvserve::GpuRequired()) {                                                               \
        GTEST_FAIL() << "no CUDA device: " << kvserve_no_gpu_why << " (KVSERVE_REQUIRE_GPU is set)"; \
      } else {                                                                                      \
        GTEST_SKIP() << "no CUDA device: " << kvserve_no_gpu_why;                                   \
      }                                                                                             \
    }                                                                                               \
  } while (0)

namespace kvserve {

// A CUDA backend on device 0, or a skip (a failure under KVSERVE_REQUIRE_GPU=1) with the
// reason there is none. A fatal failure or a skip in SetUp keeps the test body from running.
class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KVSERVE_SKIP_WITHOUT_CUDA_DEVICE();
    gpu_ = MakeCudaBackend(0);
  }
  void TearDown() override {
    for (void* p : device_) gpu_->Deallocate(p);
  }
  // A device copy of host data, freed at the end of the test.
  template <typename T>
  T* Up(const std::vector<T>& host) {
    auto* p = static_cast<T*>(gpu_->Allocate(static_cast<int64_t>(sizeof(T) * std::max<size_t>(host.size(), 1))));
    gpu_->CopyIn(p, host.data(), static_cast<int64_t>(sizeof(T) * host.size()));
    device_.push_back(p);
    return p;
  }
  template <typename T>
  std::vector<T> Down(const T* p, size_t n) {
    std::vector<T> host(n);
    gpu_->CopyOut(host.data(), p, static_cast<int64_t>(sizeof(T) * n));
    return host;
  }

  std::unique_ptr<Backend> gpu_;
  std::vector<void*> device_;
};

}  // namespace kvserve
