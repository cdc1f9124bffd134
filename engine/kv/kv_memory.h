// Sizing the KV page pool: parsing --kv-memory, reading free memory, and the peak number
// of pages a request can need (what admission reserves).
#pragma once
#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/kv/page_pool.h"

namespace kvserve {

// "512M", "2G", "1.5G", "300K", "123456" (bytes; suffixes K/M/G/T are powers of 1024,
// an optional trailing B or iB is accepted) or a fraction in (0, 1] such as "0.5" of
// available_bytes. The error names the spec.
absl::StatusOr<int64_t> ParseKvMemory(std::string_view spec, int64_t available_bytes);

// MemAvailable from /proc/meminfo, in bytes.
absl::StatusOr<int64_t> AvailableMemoryBytes();

// --kv-memory for a pool in `backend`'s memory: on a device backend a fraction is a share of
// the device's free memory (Backend::FreeMemoryBytes), and more bytes than are free is
// RESOURCE_EXHAUSTED (the allocation would abort inside the backend); on the host, a share of
// MemAvailable.
absl::StatusOr<int64_t> KvMemoryBytes(std::string_view spec, Backend& backend);

// How many pages of this shape fit in `bytes`; fails when not even one does.
absl::StatusOr<int64_t> PagesForBytes(int64_t bytes, const PagePoolShape& shape);

// Peak pages a request can hold: per layer ceil(min(quota[l], prompt + max_new) / page_size)
// summed over layers. Layers past the end of layer_quota (all, when empty) get the full cache.
int64_t PeakPagesForRequest(int64_t prompt_tokens, int64_t max_new_tokens, int64_t page_size,
                            int64_t n_layers, absl::Span<const int64_t> layer_quota = {});

}  // namespace kvserve
