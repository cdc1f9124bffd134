// Builds the decode splits and prefill tiles of one attention call (see attention_plan.h).
#include "kernels/attention_plan.h"

#include <algorithm>

namespace kvserve {

AttentionPlan PlanAttention(const AttentionBatch& b, const AttentionPlanOptions& o) {
  AttentionPlan plan;
  const int32_t n_tokens = b.n_seqs > 0 ? b.q_indptr[b.n_seqs] : 0;
  plan.token_seq.resize(static_cast<size_t>(n_tokens));
  plan.token_visible.resize(static_cast<size_t>(n_tokens));
  int64_t decode_keys = 0;
  for (int32_t s = 0; s < b.n_seqs; ++s) {
    const int32_t n_q = b.q_indptr[s + 1] - b.q_indptr[s];
    for (int32_t i = 0; i < n_q; ++i) {
      const int32_t t = b.q_indptr[s] + i;
      plan.token_seq[t] = s;
      plan.token_visible[t] = b.kv_len[s] - n_q + i + 1;
      if (n_q <= o.decode_max_queries) decode_keys += plan.token_visible[t];
    }
  }
  // Split length: enough splits to fill the device, never below min_split keys, aligned so a
  // block's warps stay in step.
  const int64_t want = (decode_keys + o.target_splits - 1) / std::max<int64_t>(1, o.target_splits);
  plan.split_len = std::max(o.min_split, (want + o.split_align - 1) / o.split_align * o.split_align);

  for (int32_t s = 0; s < b.n_seqs; ++s) {
    const int32_t n_q = b.q_indptr[s + 1] - b.q_indptr[s];
    if (n_q <= o.decode_max_queries) {
      for (int32_t t = b.q_indptr[s]; t < b.q_indptr[s + 1]; ++t) {
        DecodeMerge m{t, static_cast<int32_t>(plan.splits.size()), 0};
        for (int64_t k = 0; k < plan.token_visible[t]; k += plan.split_len) {
          const int64_t end = std::min<int64_t>(plan.token_visible[t], k + plan.split_len);
          plan.splits.push_back({t, s, static_cast<int32_t>(k), static_cast<int32_t>(end)});
        }
        m.split_end = static_cast<int32_t>(plan.splits.size());
        plan.merges.push_back(m);
      }
    } else {
      // At least one token per tile: a GQA group wider than the kernel's tile rows would
      // otherwise ask for tiles of 0 tokens and never finish.
      const int32_t tile = static_cast<int32_t>(std::max<int64_t>(1, o.tile_tokens));
      for (int32_t t = b.q_indptr[s]; t < b.q_indptr[s + 1]; t += tile) {
        const int32_t n = std::min<int32_t>(tile, b.q_indptr[s + 1] - t);
        plan.tiles.push_back({s, t, n, plan.token_visible[t + n - 1]});
      }
    }
  }
  return plan;
}

}  // namespace kvserve
