// The GPU checks' fixture: a CUDA backend on device 0 (or a skip saying why there is none)
// that moves vectors to and from device memory, freeing them after the test; and the relative
// error every check compares against its bound.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_device.h"

namespace kvserve {

// max |got - want| / max |want|: one number that reads the same for any output scale.
inline double RelError(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 1e-30;
  for (size_t i = 0; i < want.size(); ++i) {
    num = std::max(num, std::fabs(static_cast<double>(got[i]) - want[i]));
    den = std::max(den, std::fabs(static_cast<double>(want[i])));
  }
  return num / den;
}

// A CUDA backend on device 0, or a skip with the reason there is none.
class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (CudaDeviceCount(&why) == 0) GTEST_SKIP() << "no CUDA device: " << why;
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
