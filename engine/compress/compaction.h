// Compaction: after a selection, each KV head's kept entries move to the leading slots of
// its layer's pages, and the pages past the new length go back to the pool.
#pragma once
#include <cstdint>

#include "absl/status/status.h"
#include "engine/compress/kv_policy.h"
#include "engine/kv/page_pool.h"
#include "kernels/backend.h"

namespace kvserve {

// Gathers, for every KV head h, K, V and the selection's log-weight of slot
// sel.slots[h][i] into slot i; sets the layer length to sel.n_keep and frees the pages past
// it. INVALID_ARGUMENT (nothing changed) when the selection is not ascending and in range.
absl::Status CompactLayer(PagePool& pool, SequenceKv& seq, int64_t layer, const Selection& sel);

// The same for a pool in any backend's memory: on a device pool the selection (slots and
// its new log-weights, e.g. a merge-reduce policy's reweighted entries) is copied in and
// applied by Backend::CompactKv, the weighted-entry gather; on a host pool it is CompactLayer.
absl::Status CompactLayerOn(Backend& backend, PagePool& pool, SequenceKv& seq, int64_t layer, const Selection& sel);

}  // namespace kvserve
