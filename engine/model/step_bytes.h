// The bytes a forward step reads from memory: what a memory-bound decode step is measured
// against (its roofline is the machine's streaming read rate divided by these bytes).
#pragma once
#include <cstdint>

#include "engine/kv/page_pool.h"
#include "engine/model/model_weights.h"

namespace kvserve {

// Every weight a step reads in full, whatever the batch: each layer's matrices and norms, the
// output norm and head. The token embedding is left out (a step reads one row of it per token).
int64_t WeightBytesPerStep(const ModelWeights& weights);

// The K/V bytes (with their log weights) one decode token of `seq` reads over all layers: each
// layer's cached entries plus the one the token writes.
int64_t KvBytesPerDecodeToken(const SequenceKv& seq, const PagePoolShape& shape);

}  // namespace kvserve
