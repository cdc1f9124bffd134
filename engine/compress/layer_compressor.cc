#include "engine/compress/layer_compressor.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kvserve {

LayerCompressor::LayerCompressor(Backend& backend, const ScoringPolicy& policy, int64_t n_layers,
                                 EvictedWeight evicted)
    : backend_(backend), host_memory_(backend.HostMemory()), policy_(policy), evicted_(evicted), scratch_(backend),
      norms_(policy.UsesValueNorms() ? static_cast<size_t>(n_layers) : 0) {}

LayerCompressor::~LayerCompressor() {
  FreeKeptBuffer(backend_, host_memory_, spare_.p);
  for (NormCache& c : norms_) FreeKeptBuffer(backend_, host_memory_, c.buf.p);
}

float* LayerCompressor::NormsFor(NormCache& c, int64_t heads, int64_t len) {
  if (len > c.stride) {
    const int64_t stride = std::max(len, 2 * c.stride);
    Buffer grown;
    grown.bytes = static_cast<int64_t>(sizeof(float)) * heads * stride;
    grown.p = AllocateKeptBuffer(backend_, grown.bytes);
    for (int64_t h = 0; h < heads && c.known > 0; ++h) {
      backend_.Copy(static_cast<float*>(grown.p) + h * stride, static_cast<float*>(c.buf.p) + h * c.stride,
                    static_cast<int64_t>(sizeof(float)) * c.known);
    }
    FreeKeptBuffer(backend_, host_memory_, c.buf.p);
    c.buf = grown;
    c.stride = stride;
  }
  return static_cast<float*>(c.buf.p);
}

absl::Status LayerCompressor::Compress(SelectionRequest r, PagePool& pool, SequenceKv& seq, int64_t l,
                                       CompressionStats* stats) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const LayerKv L = r.Candidates();
  const int64_t heads = L.kv.n_kv_heads, len = L.len, n_keep = r.n_keep;
  if (n_keep < 1 || n_keep > len || (policy_.ScoresWithQueries() && r.window_len < 1) || r.probe_slots < 0) {
    return absl::InvalidArgumentError(absl::StrCat("selection of ", n_keep, " of ", len, " slots (", r.probe_slots,
                                                   " probe slots) with ", r.window_len, " window queries"));
  }
  scratch_.Rewind();
  NormCache* cache = norms_.empty() ? nullptr : &norms_[static_cast<size_t>(l)];
  if (cache) {
    float* norms = NormsFor(*cache, heads, len);
    // Only the entries that arrived since the last selection are projected.
    backend_.ProjectedValueNorms(L.kv, L.pages.data(), cache->known, len, r.wo, r.n_heads, norms, cache->stride);
    r.value_norms = norms;
    r.norms_stride = cache->stride;
  }
  const int32_t* slots = SelectSlots(policy_, r, backend_, scratch_);
  const auto t1 = Clock::now();
  if (tracker_) {
    std::vector<int32_t> kept(static_cast<size_t>(heads * n_keep));
    backend_.CopyOut(kept.data(), slots, static_cast<int64_t>(sizeof(int32_t)) * heads * n_keep);
    tracker_->OnSelection(l, heads, len, kept, n_keep);
  }
  float* merged = nullptr;
  if (MergesAt(evicted_, r.mid_prompt)) {
    merged = scratch_.Take<float>(heads * n_keep);
    backend_.MergeEvictedWeights(L.kv, L.pages.data(), len, slots, n_keep, MergeRadius(evicted_),
                                 MergesValues(evicted_), merged);
  }
  backend_.CompactKv(L.kv, L.pages.data(), len, slots, merged, n_keep);
  if (cache) {
    if (spare_.bytes < cache->buf.bytes) {
      FreeKeptBuffer(backend_, host_memory_, spare_.p);
      spare_.bytes = cache->buf.bytes;
      spare_.p = AllocateKeptBuffer(backend_, spare_.bytes);
    }
    backend_.GatherPerHead(static_cast<float*>(cache->buf.p), cache->stride, slots, heads, n_keep,
                           static_cast<float*>(spare_.p), cache->stride);
    std::swap(cache->buf, spare_);
    cache->known = n_keep;
  }
  // The freed pages go back to the pool at once: on a device, every later use of them is an
  // op on the same stream, so it runs after the compaction that reads them.
  const int64_t before = seq.layer_len[l] - r.probe_slots;
  seq.TruncateLayer(pool, l, n_keep);
  stats->select_seconds += std::chrono::duration<double>(t1 - t0).count();
  stats->compact_seconds += std::chrono::duration<double>(Clock::now() - t1).count();
  stats->evicted_slots += before - n_keep;
  ++stats->compactions;
  return absl::OkStatus();
}

}  // namespace kvserve
