// A typed array in a backend's memory (host for CPU, device for CUDA), grown on demand.
#pragma once
#include <cstdint>

#include "kernels/backend.h"

namespace kvserve {

template <typename T>
class BackendBuffer {
 public:
  explicit BackendBuffer(Backend& backend) : backend_(&backend) {}
  ~BackendBuffer() { backend_->Deallocate(data_); }
  BackendBuffer(const BackendBuffer&) = delete;
  BackendBuffer& operator=(const BackendBuffer&) = delete;

  // Makes room for n elements. Contents are unspecified after a resize that grows the
  // buffer (callers write before they read).
  void Resize(int64_t n) {
    if (n > capacity_) {
      backend_->Deallocate(data_);
      data_ = static_cast<T*>(backend_->Allocate(n * static_cast<int64_t>(sizeof(T))));
      capacity_ = n;
    }
    size_ = n;
  }
  T* data() { return data_; }
  const T* data() const { return data_; }
  int64_t size() const { return size_; }

 private:
  Backend* backend_;
  T* data_ = nullptr;
  int64_t size_ = 0;
  int64_t capacity_ = 0;
};

}  // namespace kvserve
