// Page pool bookkeeping: a free list, an in-use bit per page, and reservation counters.
// The pages' memory is KvStorage's.
#include "engine/kv/page_pool.h"

#include <algorithm>
#include <cassert>

#include "absl/strings/str_cat.h"
#include "kernels/kv_rows.h"

namespace kvserve {

absl::Status CheckKvDType(DType dtype, const Backend& memory) {
  if (!IsKvDType(dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("--kv-dtype must be f32 or f16, got ", std::string(DTypeName(dtype))));
  }
  if (dtype == DType::kF16 && !memory.HostMemory()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kv-dtype f16 runs on the CPU backend only (the ", std::string(memory.Name()), " kernels read f32 pages)"));
  }
  return absl::OkStatus();
}

DType DefaultKvDType(const Backend& memory) { return memory.HostMemory() ? DType::kF16 : DType::kF32; }

PagePool::PagePool(const PagePoolShape& shape) : PagePool(shape, nullptr) {}

PagePool::PagePool(const PagePoolShape& shape, Backend* memory)
    : shape_(shape), storage_(shape, memory), in_use_(static_cast<size_t>(shape.num_pages), 0) {
  free_.reserve(static_cast<size_t>(shape.num_pages));
  for (int64_t p = shape.num_pages - 1; p >= 0; --p) free_.push_back(static_cast<int32_t>(p));
}

void PagePool::Take(int64_t n, std::vector<int32_t>* out) {
  for (int64_t i = 0; i < n; ++i) {
    const int32_t p = free_.back();
    free_.pop_back();
    in_use_[p] = 1;
    out->push_back(p);
  }
  peak_used_ = std::max(peak_used_, shape_.num_pages - free_pages());
}

void PagePool::Give(absl::Span<const int32_t> pages) {
  for (int32_t p : pages) {
    assert(in_use_[p] && "page freed twice");
    in_use_[p] = 0;
    free_.push_back(p);
  }
}

absl::Status PagePool::Reserve(int64_t n) {
  if (n < 0) return absl::InvalidArgumentError(absl::StrCat("cannot reserve ", n, " pages"));
  if (n > unpromised_pages()) {
    return absl::ResourceExhaustedError(absl::StrCat("KV page pool: reservation of ", n, " pages does not fit, ",
                                                     unpromised_pages(), " unpromised of ", shape_.num_pages));
  }
  reserved_ += n;
  return absl::OkStatus();
}

absl::Status PagePool::Unreserve(int64_t n) {
  if (n < 0 || n > reserved_ - reserved_used_) {
    return absl::InternalError(absl::StrCat("KV page pool: cannot unreserve ", n, " pages, ",
                                            reserved_ - reserved_used_, " reserved and unused"));
  }
  reserved_ -= n;
  return absl::OkStatus();
}

absl::Status PagePool::AllocateReserved(int64_t n, std::vector<int32_t>* out) {
  if (n > reserved_ - reserved_used_) {
    return absl::ResourceExhaustedError(absl::StrCat("KV page pool: need ", n, " reserved pages, ",
                                                     reserved_ - reserved_used_, " reserved and unused"));
  }
  reserved_used_ += n;
  Take(n, out);
  return absl::OkStatus();
}

void PagePool::FreeReserved(absl::Span<const int32_t> pages) {
  reserved_used_ -= static_cast<int64_t>(pages.size());
  Give(pages);
}

absl::Status PagePool::Allocate(int64_t n, std::vector<int32_t>* out) {
  if (n > unpromised_pages()) {
    return absl::ResourceExhaustedError(absl::StrCat("KV page pool exhausted: need ", n, " pages, ",
                                                     unpromised_pages(), " free of ", shape_.num_pages));
  }
  unreserved_used_ += n;
  Take(n, out);
  return absl::OkStatus();
}

void PagePool::Free(absl::Span<const int32_t> pages) {
  unreserved_used_ -= static_cast<int64_t>(pages.size());
  Give(pages);
}

PagePoolStats PagePool::stats() const {
  PagePoolStats s;
  s.pages_total = shape_.num_pages;
  s.pages_used = shape_.num_pages - free_pages();
  s.pages_reserved = reserved_;
  s.pages_peak = peak_used_;
  s.page_bytes = PageBytes(shape_);
  s.bytes_total = s.pages_total * s.page_bytes;
  s.bytes_used = s.pages_used * s.page_bytes;
  return s;
}

absl::Status PagePool::CheckInvariants(absl::Span<const std::vector<int32_t>* const> owners) const {
  auto fail = [](auto&&... parts) { return absl::InternalError(absl::StrCat("KV page pool: ", parts...)); };
  const int64_t total = shape_.num_pages;
  std::vector<uint8_t> seen(static_cast<size_t>(total), 0);
  for (int32_t p : free_) {
    if (p < 0 || p >= total) return fail("free list holds page ", p, " outside [0, ", total, ")");
    if (seen[p]) return fail("page ", p, " is on the free list twice");
    if (in_use_[p]) return fail("page ", p, " is on the free list and marked in use");
    seen[p] = 1;
  }
  const int64_t used = static_cast<int64_t>(std::count(in_use_.begin(), in_use_.end(), 1));
  if (used + free_pages() != total) return fail(used, " used + ", free_pages(), " free != ", total, " total");
  if (used != reserved_used_ + unreserved_used_) {
    return fail(used, " used != ", reserved_used_, " reserved-used + ", unreserved_used_, " unreserved-used");
  }
  if (reserved_used_ < 0 || reserved_used_ > reserved_) {
    return fail(reserved_used_, " reserved pages in use, outside [0, ", reserved_, "] reserved");
  }
  if (reserved_ + unreserved_used_ > total) {
    return fail(reserved_, " reserved + ", unreserved_used_, " unreserved used exceeds ", total, " total");
  }
  if (peak_used_ < used || peak_used_ > total) return fail("peak ", peak_used_, " outside [", used, ", ", total, "]");
  if (owners.empty()) return absl::OkStatus();
  std::fill(seen.begin(), seen.end(), 0);
  int64_t owned = 0;
  for (const std::vector<int32_t>* pages : owners) {
    for (int32_t p : *pages) {
      if (p < 0 || p >= total) return fail("owned page ", p, " outside [0, ", total, ")");
      if (!in_use_[p]) return fail("owned page ", p, " is not in use");
      if (seen[p]) return fail("page ", p, " is owned twice");
      seen[p] = 1;
      ++owned;
    }
  }
  if (owned != used) return fail(owned, " pages owned but ", used, " in use (a page leaked)");
  return absl::OkStatus();
}

absl::Status SequenceKv::Reserve(PagePool& pool, int64_t n) {
  if (reserved_pages != 0 || pages_held() != 0) {
    return absl::FailedPreconditionError("a sequence reserves pages once, before holding any");
  }
  if (absl::Status st = pool.Reserve(n); !st.ok()) return st;
  reserved_pages = n;
  return absl::OkStatus();
}

absl::Status SequenceKv::GrowLayer(PagePool& pool, int64_t l, int64_t slots) {
  const int64_t ps = pool.shape().page_size;
  const int64_t more = (slots + ps - 1) / ps - static_cast<int64_t>(layer_pages[l].size());
  if (more <= 0) return absl::OkStatus();
  if (reserved_pages == 0) return pool.Allocate(more, &layer_pages[l]);
  if (pages_held() + more > reserved_pages) {
    return absl::ResourceExhaustedError(absl::StrCat("sequence needs ", pages_held() + more,
                                                     " pages, beyond its reservation of ", reserved_pages));
  }
  return pool.AllocateReserved(more, &layer_pages[l]);
}

void SequenceKv::TruncateLayer(PagePool& pool, int64_t l, int64_t slots) {
  assert(slots >= 0 && slots <= layer_len[l]);
  const int64_t ps = pool.shape().page_size;
  const size_t keep = static_cast<size_t>((slots + ps - 1) / ps);
  std::vector<int32_t>& pages = layer_pages[l];
  if (pages.size() > keep) {
    const absl::Span<const int32_t> tail = absl::MakeConstSpan(pages).subspan(keep);
    if (reserved_pages > 0) {
      pool.FreeReserved(tail);
    } else {
      pool.Free(tail);
    }
    pages.resize(keep);
  }
  layer_len[l] = slots;
}

void SequenceKv::ShrinkReservation(PagePool& pool, int64_t n) {
  n = std::max(n, pages_held());
  if (reserved_pages == 0 || n >= reserved_pages) return;
  absl::Status st = pool.Unreserve(reserved_pages - n);
  assert(st.ok() && "pages reserved beyond those held are never in use");
  (void)st;
  reserved_pages = n;
}

int64_t SequenceKv::pages_held() const {
  int64_t n = 0;
  for (const auto& pages : layer_pages) n += static_cast<int64_t>(pages.size());
  return n;
}

void SequenceKv::Release(PagePool& pool) {
  for (auto& pages : layer_pages) {
    if (reserved_pages > 0) {
      pool.FreeReserved(pages);
    } else {
      pool.Free(pages);
    }
    pages.clear();
  }
  if (reserved_pages > 0) {
    absl::Status st = pool.Unreserve(reserved_pages);
    assert(st.ok() && "a sequence's own reservation is always unused after freeing its pages");
    (void)st;
    reserved_pages = 0;
  }
  std::fill(layer_len.begin(), layer_len.end(), 0);
}

}  // namespace kvserve
