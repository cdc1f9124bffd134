// Work lists for the device attention kernels, built on the host from an AttentionBatch
// (FlashInfer's plan/run split): decode tokens become key-range splits that are merged with
// their online-softmax states; prefill chunks become tiles of query rows. Plain host code, so
// it is unit-tested without a GPU (tests/kernels/attention_plan_test.cc).
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/backend.h"

namespace kvserve {

// One block's share of a decode token: keys [kv_begin, kv_end) of sequence seq.
struct DecodeSplit {
  int32_t token = 0;  // query row in the batch
  int32_t seq = 0;
  int32_t kv_begin = 0;
  int32_t kv_end = 0;
};

// A decode token's splits are splits[split_begin, split_end).
struct DecodeMerge {
  int32_t token = 0;
  int32_t split_begin = 0;
  int32_t split_end = 0;
};

// Query rows [token_begin, token_begin + n_tokens) of sequence seq; they see keys up to
// kv_end (exclusive, the last token's visible length), causally.
struct PrefillTile {
  int32_t seq = 0;
  int32_t token_begin = 0;
  int32_t n_tokens = 0;
  int32_t kv_end = 0;
};

struct AttentionPlanOptions {
  int64_t decode_max_queries = 8;  // sequences with at most this many new tokens use the decode path
  int64_t tile_tokens = 16;        // query tokens per prefill tile
  int64_t target_splits = 512;     // aim for at least this many decode splits in total
  int64_t min_split = 256;         // keys per split at least (a multiple of split_align)
  int64_t split_align = 128;       // split lengths are multiples of this
};

struct AttentionPlan {
  std::vector<int32_t> token_seq;      // [n_tokens] sequence of each query row
  std::vector<int32_t> token_visible;  // [n_tokens] keys each query row sees
  std::vector<DecodeSplit> splits;
  std::vector<DecodeMerge> merges;
  std::vector<PrefillTile> tiles;
  int64_t split_len = 0;               // keys per decode split (the last one of a token may be shorter)
};

AttentionPlan PlanAttention(const AttentionBatch& batch, const AttentionPlanOptions& options);

}  // namespace kvserve
