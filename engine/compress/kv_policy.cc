// What every scoring policy shares: scratch in backend memory, the top-k selection over a
// policy's scores, and dropping a question probe's columns.
#include "engine/compress/kv_policy.h"

#include <algorithm>
#include <cstdlib>
#include <limits>

namespace kvserve {

void* AllocateKeptBuffer(Backend& backend, int64_t bytes) {
  if (!backend.HostMemory()) return backend.Allocate(bytes);
  return bytes > 0 ? std::calloc(static_cast<size_t>(bytes), 1) : nullptr;
}

void FreeKeptBuffer(Backend& backend, bool host_memory, void* p) {
  if (host_memory) {
    std::free(p);
  } else {
    backend.Deallocate(p);
  }
}

BackendScratch::~BackendScratch() {
  for (Block& b : blocks_) FreeKeptBuffer(backend_, host_memory_, b.p);
}

void* BackendScratch::TakeBytes(int64_t bytes) {
  if (next_ == blocks_.size()) blocks_.emplace_back();
  Block& b = blocks_[next_++];
  if (bytes > b.bytes) {
    // Deallocate waits for device work still using the old block (cudaFree synchronizes);
    // this happens only while the blocks grow to a sequence's largest layer.
    FreeKeptBuffer(backend_, host_memory_, b.p);
    b.bytes = std::max(bytes, b.bytes * 2);
    b.p = AllocateKeptBuffer(backend_, b.bytes);
  }
  return b.p;
}

int32_t* SelectSlots(const ScoringPolicy& policy, const SelectionRequest& r, Backend& backend,
                     BackendScratch& scratch) {
  const LayerKv L = r.Candidates();
  const int64_t heads = L.kv.n_kv_heads, len = L.len;
  SelectionRequest q = r;
  if (policy.UsesValueNorms() && q.value_norms == nullptr) {
    float* norms = scratch.Take<float>(heads * len);
    backend.ProjectedValueNorms(L.kv, L.pages.data(), 0, len, r.wo, r.n_heads, norms, len);
    q.value_norms = norms;
    q.norms_stride = len;
  }
  float* scores = scratch.Take<float>(heads * len);
  policy.Score(q, backend, scratch, scores);
  if (const int64_t first = ForcedFirstSlots(r); first > 0) {
    // Above any score a policy gives (they are finite), so TopKPerHead takes them first.
    const std::vector<float> top(static_cast<size_t>(first), std::numeric_limits<float>::max());
    for (int64_t h = 0; h < heads; ++h) {
      backend.CopyIn(scores + h * len, top.data(), static_cast<int64_t>(sizeof(float)) * first);
    }
  }
  int32_t* slots = scratch.Take<int32_t>(heads * r.n_keep);
  backend.TopKPerHead(scores, heads, len, r.n_keep, slots);
  return slots;
}

Selection ScoringPolicy::Select(const SelectionRequest& r, Backend& backend) const {
  BackendScratch scratch(backend);
  const int32_t* slots = SelectSlots(*this, r, backend, scratch);
  const int64_t heads = r.layer.kv.n_kv_heads, n = r.n_keep;
  Selection sel;
  sel.n_keep = n;
  sel.slots.resize(static_cast<size_t>(heads * n));
  backend.CopyOut(sel.slots.data(), slots, static_cast<int64_t>(sizeof(int32_t)) * heads * n);
  sel.log_w.reserve(sel.slots.size());
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < n; ++i) sel.log_w.push_back(r.layer.LogWeight(sel.slots[h * n + i], h));
  }
  return sel;
}

int64_t ForcedFirstSlots(const SelectionRequest& r) {
  return std::max<int64_t>(0, std::min(SinksWithin(r.keep_first, r.n_keep), r.Candidates().len));
}

void KeepCandidateColumns(const SelectionRequest& r, Backend& backend, BackendScratch& scratch, const float* all,
                          float* out) {
  const int64_t heads = r.layer.kv.n_kv_heads, scored = r.layer.len, len = scored - r.probe_slots;
  // An identity gather of the leading len columns of each head.
  std::vector<int32_t> identity(static_cast<size_t>(heads * len));
  for (int64_t i = 0; i < heads * len; ++i) identity[i] = static_cast<int32_t>(i % len);
  auto* ids = scratch.Take<int32_t>(heads * len);
  backend.CopyIn(ids, identity.data(), static_cast<int64_t>(sizeof(int32_t)) * heads * len);
  backend.GatherPerHead(all, scored, ids, heads, len, out, len);
}

}  // namespace kvserve
