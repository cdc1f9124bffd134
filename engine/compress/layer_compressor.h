// The one orchestration of a scoring policy's compression, for a KV pool in any backend's
// memory: the policy scores through Backend ops, Backend::TopKPerHead selects, Backend::CompactKv
// moves the kept entries, and the pages past them go back to the pool. No page leaves the
// backend, and nothing inside a layer's compression waits for it: the number of pages kept
// is known on the host beforehand (n_keep).
#pragma once
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "engine/compress/compression_settings.h"
#include "engine/compress/kept_positions.h"
#include "engine/compress/kv_policy.h"
#include "engine/kv/page_pool.h"
#include "kernels/backend.h"

namespace kvserve {

struct CompressionStats {
  int64_t compactions = 0;       // layer compactions run
  int64_t evicted_slots = 0;     // slots dropped, summed over layers
  // On a device backend these are enqueue times: the work finishes asynchronously.
  double select_seconds = 0;     // scoring and selection
  double compact_seconds = 0;    // merging evicted weights (when asked), moving entries, freeing pages
};

class LayerCompressor {
 public:
  // Buffers come from `backend`, which must be the backend of every later Compress call (and,
  // when it is a device backend, outlive this). evicted: what becomes of the evicted entries'
  // weight (merged into the kept entries with the nearest keys, or dropped).
  LayerCompressor(Backend& backend, const ScoringPolicy& policy, int64_t n_layers,
                  EvictedWeight evicted = EvictedWeight::kDrop);
  ~LayerCompressor();
  LayerCompressor(const LayerCompressor&) = delete;
  LayerCompressor& operator=(const LayerCompressor&) = delete;

  // Keeps r.n_keep entries per KV head of layer l (r.layer's pages are backend memory,
  // r.window host memory), compacts them to the leading slots (with the evicted entries'
  // weight merged into them where MergesAt(evicted, r.mid_prompt)) and frees the pages past
  // them (a question probe's slots, r.probe_slots, among them). Adds to *stats.
  absl::Status Compress(SelectionRequest r, PagePool& pool, SequenceKv& seq, int64_t l, CompressionStats* stats);
  // Follows every later selection in *tracker (a diagnostic: the kept slots are read back).
  void TrackPositions(KeptPositions* tracker) { tracker_ = tracker; }

 private:
  // A grow-only backend buffer.
  struct Buffer {
    void* p = nullptr;
    int64_t bytes = 0;
  };
  // For policies that read value norms: per layer, the norms [n_kv_heads, stride] of the
  // first `known` slots, kept in step with compaction so each entry is projected once.
  struct NormCache {
    Buffer buf;
    int64_t stride = 0;
    int64_t known = 0;
  };
  float* NormsFor(NormCache& c, int64_t heads, int64_t len);

  Backend& backend_;
  const bool host_memory_;  // backend_.HostMemory(): then the destructor never touches backend_
  const ScoringPolicy& policy_;
  const EvictedWeight evicted_;
  BackendScratch scratch_;
  Buffer spare_;
  std::vector<NormCache> norms_;
  KeptPositions* tracker_ = nullptr;
};

}  // namespace kvserve
