// The memory behind the KV pages: K and V of every page (of the pool's dtype) and a fp32
// log-weight per (slot, head), in host memory or in a device backend's. It knows nothing of
// which page is whose; PagePool keeps that book.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/backend.h"

namespace kvserve {

struct PagePoolShape {
  int64_t num_pages = 0;
  int64_t page_size = 16;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  DType kv_dtype = DType::kF32;  // K/V storage: kF32, or kF16 (host pools only; see PagedKv)
};

class KvStorage {
 public:
  // In `memory`'s memory when it is a device backend (it must outlive the storage), else on
  // the host.
  KvStorage(const PagePoolShape& shape, Backend* memory);
  ~KvStorage();
  KvStorage(const KvStorage&) = delete;
  KvStorage& operator=(const KvStorage&) = delete;

  // The pages as kernels see them.
  PagedKv view();
  // False when the pages live in a device backend's memory (host code must not touch them).
  bool host_memory() const { return device_ == nullptr; }

  // Bytes one page takes: K and V (of kv_dtype) and fp32 log-weights.
  static int64_t PageBytes(const PagePoolShape& shape);

 private:
  PagePoolShape shape_;
  std::vector<uint8_t> k_, v_;  // host storage of kv_dtype (empty when device_ holds it)
  std::vector<float> log_w_;
  Backend* device_ = nullptr;   // device storage owner, or nullptr
  void* dk_ = nullptr;
  void* dv_ = nullptr;
  float* dlog_w_ = nullptr;
};

}  // namespace kvserve
