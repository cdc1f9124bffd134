// The global pool of KV pages: the page table (which pages are free, reserved, in use and
// by whom; host-only bookkeeping with its invariants) over the KvStorage that holds them. A
// page holds page_size tokens of one layer: K and V as [page_size, n_kv_heads, head_dim]
// plus a log-weight per (slot, head). No math in here.
#pragma once
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "engine/kv/kv_storage.h"
#include "kernels/backend.h"

namespace kvserve {

// OK when a pool of K/V storage `dtype` can live in `memory`'s memory: kF32 anywhere, kF16 in
// host memory only (the device kernels read fp32 pages); otherwise INVALID_ARGUMENT naming
// --kv-dtype.
absl::Status CheckKvDType(DType dtype, const Backend& memory);

// The K/V storage a pool in `memory` gets when --kv-dtype is not given: kF16 in host memory
// (half the KV bytes of kF32, what llama.cpp stores by default; logits move by ~0.1%), kF32
// on a device (its kernels read fp32 pages), so no backend fails by default.
DType DefaultKvDType(const Backend& memory);

struct PagePoolStats {
  int64_t pages_total = 0;
  int64_t pages_used = 0;      // handed out, reserved or not
  int64_t pages_reserved = 0;  // promised to admitted sequences (used by them or not yet)
  int64_t pages_peak = 0;      // most pages ever used at once
  int64_t page_bytes = 0;
  int64_t bytes_total = 0;
  int64_t bytes_used = 0;
};

// Pages come out two ways. A reservation (Reserve at admission, AllocateReserved as the
// sequence grows, FreeReserved/Unreserve at the end) makes sure a running sequence can
// never fail for lack of pages. Plain Allocate serves callers that own the whole pool
// (single-sequence tools) and never takes a page that a reservation has promised.
class PagePool {
 public:
  explicit PagePool(const PagePoolShape& shape);
  // Storage in `memory`'s memory when it is not host memory (a device backend); the
  // bookkeeping stays on the host. `memory` must outlive the pool.
  PagePool(const PagePoolShape& shape, Backend* memory);
  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;

  // Promises n pages, or fails with RESOURCE_EXHAUSTED naming need and availability.
  absl::Status Reserve(int64_t n);
  // Withdraws n promised pages; at least that many must be reserved and not in use.
  absl::Status Unreserve(int64_t n);
  // Appends n pages drawn from the reservations, or fails (taking none) when the
  // reserved-but-unused pages are fewer than n.
  absl::Status AllocateReserved(int64_t n, std::vector<int32_t>* out);
  // Returns pages drawn by AllocateReserved; they stay reserved.
  void FreeReserved(absl::Span<const int32_t> pages);

  // Appends n unpromised free pages to *out, or fails with RESOURCE_EXHAUSTED and takes none.
  absl::Status Allocate(int64_t n, std::vector<int32_t>* out);
  // Returns pages drawn by Allocate; each must be in use.
  void Free(absl::Span<const int32_t> pages);

  int64_t free_pages() const { return static_cast<int64_t>(free_.size()); }
  // Pages a new reservation or a plain Allocate could still get.
  int64_t unpromised_pages() const { return shape_.num_pages - reserved_ - unreserved_used_; }
  const PagePoolShape& shape() const { return shape_; }
  PagePoolStats stats() const;
  // The storage as kernels see it.
  PagedKv view() { return storage_.view(); }
  // False when the pages live in a device backend's memory (host code must not touch them).
  bool host_memory() const { return storage_.host_memory(); }

  // Checks the bookkeeping: the free list and in-use bits agree, no page is free twice,
  // free + used == total, reserved use stays inside the reservations, reservations plus
  // unreserved use fit the pool. With owners, also that every owned page is in use, owned
  // once, and that owners hold every used page. Returns INTERNAL naming the first breach.
  absl::Status CheckInvariants(absl::Span<const std::vector<int32_t>* const> owners = {}) const;

  // Bytes one page takes: K and V (of kv_dtype) and fp32 log-weights.
  static int64_t PageBytes(const PagePoolShape& shape) { return KvStorage::PageBytes(shape); }

 private:
  void Take(int64_t n, std::vector<int32_t>* out);
  void Give(absl::Span<const int32_t> pages);

  PagePoolShape shape_;
  KvStorage storage_;
  std::vector<int32_t> free_;     // LIFO: recently freed pages are warm in cache
  std::vector<uint8_t> in_use_;
  int64_t reserved_ = 0;          // pages promised to reservations
  int64_t reserved_used_ = 0;     // of those, pages handed out
  int64_t unreserved_used_ = 0;   // pages handed out by plain Allocate
  int64_t peak_used_ = 0;
};

// One sequence's cache: per layer an ordered page list and a length in slots, plus the
// pages it has reserved (0: it draws plain, unreserved pages).
struct SequenceKv {
  std::vector<std::vector<int32_t>> layer_pages;
  std::vector<int64_t> layer_len;
  int64_t reserved_pages = 0;

  explicit SequenceKv(int64_t n_layers) : layer_pages(n_layers), layer_len(n_layers, 0) {}
  // Reserves n pages for this sequence (once, before it holds any page).
  absl::Status Reserve(PagePool& pool, int64_t n);
  // Makes layer l hold enough pages for `slots` slots, drawing from the reservation when
  // there is one. Fails with RESOURCE_EXHAUSTED (nothing taken) past the reservation.
  absl::Status GrowLayer(PagePool& pool, int64_t l, int64_t slots);
  // Shortens layer l to `slots` slots and gives the pages past them back (they stay in
  // this sequence's reservation, if any). slots must not exceed the layer's length.
  void TruncateLayer(PagePool& pool, int64_t l, int64_t slots);
  // Lowers the reservation to n pages (at least the pages held), returning the rest to the
  // pool for admission. A no-op for a sequence without a reservation or when n is not lower.
  void ShrinkReservation(PagePool& pool, int64_t n);
  int64_t pages_held() const;
  // Gives every page and the reservation back to the pool and empties the sequence.
  void Release(PagePool& pool);
};

}  // namespace kvserve
