// Deep copy of one sequence's cache into fresh pages of the same pool, so a tool can
// compress the copy several ways while the original stays as it was prefilled.
#pragma once
#include "absl/status/statusor.h"
#include "engine/kv/page_pool.h"

namespace kvserve {

// A new sequence whose every layer holds the same slots (K, V and log-weights) as src, in
// pages drawn from pool with plain Allocate (no reservation). RESOURCE_EXHAUSTED, with no
// page taken, when the pool cannot hold src's pages a second time. The copy goes through
// pool.view() on the host: UNIMPLEMENTED for a pool in device memory.
absl::StatusOr<SequenceKv> CloneSequence(PagePool& pool, const SequenceKv& src);

}  // namespace kvserve
