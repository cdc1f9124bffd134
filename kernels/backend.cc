// Host-memory defaults of the Backend memory hooks: what the CPU backend uses.
#include <cstdlib>
#include <cstring>

#include "kernels/backend.h"

namespace kvserve {

void* Backend::Allocate(int64_t bytes) {
  return bytes > 0 ? std::calloc(static_cast<size_t>(bytes), 1) : nullptr;
}

void Backend::Deallocate(void* p) { std::free(p); }

void Backend::CopyIn(void* dst, const void* host_src, int64_t bytes) {
  if (bytes > 0) std::memcpy(dst, host_src, static_cast<size_t>(bytes));
}

void Backend::CopyOut(void* host_dst, const void* src, int64_t bytes) {
  if (bytes > 0) std::memcpy(host_dst, src, static_cast<size_t>(bytes));
}

void Backend::Copy(void* dst, const void* src, int64_t bytes) {
  if (bytes > 0) std::memmove(dst, src, static_cast<size_t>(bytes));
}

void Backend::MatMulShared(const WeightView* ws, float* const* ys, int64_t count, const float* x, int64_t n) {
  for (int64_t i = 0; i < count; ++i) MatMul(ws[i], x, ys[i], n);
}

}  // namespace kvserve
