// Small pieces the policies share: reading one head of a layer contiguously, and turning
// per-entry scores into a Selection.
#pragma once
#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "engine/compress/kv_policy.h"

namespace kvserve {

// The n highest-scoring indices of scores, returned in ascending index order. Ties go to
// the lower index, so selection is deterministic.
std::vector<int32_t> TopNAscending(absl::Span<const float> scores, int64_t n);

// Per head, the n_keep best slots by scores [n_kv_heads, layer.len]; log-weights carried over.
Selection SelectTopPerHead(const LayerKv& layer, absl::Span<const float> scores, int64_t n_keep);

// scores [heads, len] without each head's last `drop` columns: [heads, len - drop].
std::vector<float> DropTrailingSlots(absl::Span<const float> scores, int64_t heads, int64_t len, int64_t drop);

// Keys (values when `values`) of KV head h at slots [first, layer.len):
// out [layer.len - first, head_dim].
void GatherHead(const LayerKv& layer, int64_t h, bool values, float* out, int64_t first = 0);

}  // namespace kvserve
