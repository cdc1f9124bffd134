// Compaction of a selection made on the host (merge-reduce's reweighted entries, one-shot
// callers): each KV head's kept entries move to the leading slots of its layer's pages
// through Backend::CompactKv, and the pages past the new length go back to the pool.
// (Scoring policies compact in LayerCompressor, with the slots already in backend memory.)
#pragma once
#include <cstdint>

#include "absl/status/status.h"
#include "engine/compress/kv_policy.h"
#include "engine/kv/page_pool.h"
#include "kernels/backend.h"

namespace kvserve {

// For every KV head h, K and V of slot sel.slots[h][i] move to slot i with log-weight
// sel.log_w[h][i]; the layer length becomes sel.n_keep and the pages past it are freed.
// INVALID_ARGUMENT (nothing changed) when the selection is not ascending and in range.
absl::Status CompactLayer(Backend& backend, PagePool& pool, SequenceKv& seq, int64_t layer, const Selection& sel);

}  // namespace kvserve
