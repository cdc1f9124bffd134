#include "engine/kv/kv_storage.h"

#include "kernels/kv_rows.h"

namespace kvserve {
namespace {

int64_t KvBytes(const PagePoolShape& s) {
  return s.num_pages * s.page_size * s.n_kv_heads * RowBytes(s.kv_dtype, s.head_dim);
}

int64_t LogWeightBytes(const PagePoolShape& s) {
  return s.num_pages * s.page_size * s.n_kv_heads * static_cast<int64_t>(sizeof(float));
}

}  // namespace

KvStorage::KvStorage(const PagePoolShape& shape, Backend* memory) : shape_(shape) {
  if (memory && !memory->HostMemory()) {
    device_ = memory;
    dk_ = memory->Allocate(KvBytes(shape));
    dv_ = memory->Allocate(KvBytes(shape));
    dlog_w_ = static_cast<float*>(memory->Allocate(LogWeightBytes(shape)));
    return;
  }
  k_.resize(static_cast<size_t>(KvBytes(shape)));
  v_.resize(k_.size());
  log_w_.resize(static_cast<size_t>(shape.num_pages * shape.page_size * shape.n_kv_heads));
}

KvStorage::~KvStorage() {
  if (device_) {
    device_->Deallocate(dk_);
    device_->Deallocate(dv_);
    device_->Deallocate(dlog_w_);
  }
}

int64_t KvStorage::PageBytes(const PagePoolShape& s) {
  return s.page_size * s.n_kv_heads * (2 * RowBytes(s.kv_dtype, s.head_dim) + static_cast<int64_t>(sizeof(float)));
}

PagedKv KvStorage::view() {
  if (device_) return {dk_, dv_, dlog_w_, shape_.page_size, shape_.n_kv_heads, shape_.head_dim, shape_.kv_dtype};
  return {k_.data(), v_.data(), log_w_.data(), shape_.page_size, shape_.n_kv_heads, shape_.head_dim, shape_.kv_dtype};
}

}  // namespace kvserve
