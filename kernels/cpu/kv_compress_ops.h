// The CPU backend's KV compression ops (scoring, per-head top-k, compaction), with the same
// argument shapes as the CUDA launchers in kernels/cuda/cuda_ops.h. Scoring comes twice, as
// a reference in plain double loops (the oracle of the CUDA kernels) and as the CPU backend's
// float form beside it (matmuls through the BLAS; its numerics are what the kvpress goldens
// pin); the two agree to float rounding (tests/engine/compress/kv_compress_reference_test).
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/backend.h"

namespace kvserve::cpu {

// snapkv_scores.cc. SnapKV's score of one layer, scores [n_kv_heads, len]:
//   m = len - w; window query i (0-based, at slot m + i) of query head h sees slots [0, m + i]
//   with logits q . k_s * scale + log_w[s]; attn[h, s] = mean over i of its softmax, s < m;
//   pooled[h, s] = sum of attn[h, t] over t in [s - kernel/2, s + kernel/2] within [0, m),
//   divided by kernel (zero padding); scores[g, s] = mean of pooled over g's query heads.
//   The window's own slots [m, len) score max(0, every other score) + 1 (as kvpress).
// window [w, n_heads, head_dim]; pages [ceil(len / page_size)].
void SnapKvScores(const PagedKv& kv, const int32_t* pages, int64_t len, const float* window, int64_t w,
                  int64_t n_heads, float scale, int64_t pool_kernel, float* scores);

// snapkv_scores.cc. The CPU backend's form of SnapKvScores: the same definition in float,
// each query head's window logits one matmul [w, len] over the head's gathered keys.
void SnapKvScoresBlas(const PagedKv& kv, const int32_t* pages, int64_t len, const float* window, int64_t w,
                      int64_t n_heads, float scale, int64_t pool_kernel, Determinism determinism, float* scores);

// value_norms.cc. norms [n_kv_heads, stride], columns [first, len): the mean over the query
// heads h of KV head g of sum_o |sum_e v[s, g, e] * wo[o, h * head_dim + e]|.
// wo [hidden, n_heads * head_dim].
void ProjectedValueNorms(const PagedKv& kv, const int32_t* pages, int64_t first, int64_t len, const float* wo,
                         int64_t hidden, int64_t n_heads, float* norms, int64_t stride);

// value_norms.cc. The CPU backend's form of ProjectedValueNorms: wo (any dtype) dequantized
// once, then per query head one matmul of the values through its slice, in float.
void ProjectedValueNormsBlas(const PagedKv& kv, const int32_t* pages, int64_t first, int64_t len,
                             const WeightView& wo, int64_t n_heads, Determinism determinism, float* norms,
                             int64_t stride);

// value_norms.cc. merged [heads, len]: FLT_MAX for the n_first best entries of each head by
// base [heads, len] (TopKPerHead's order), (base + eps) * norms elsewhere; norms
// [heads, norms_stride].
void CriticalKvScores(const float* base, const float* norms, int64_t norms_stride, int64_t heads, int64_t len,
                      int64_t n_first, float eps, float* merged);

// topk_per_head.cc. slots [heads, k], ascending per head: the k best of scores [heads, len]
// under one total order, higher score first and, for equal scores, lower slot first (the
// rule every backend's TopKPerHead follows). -0.0 equals +0.0.
void TopKPerHead(const float* scores, int64_t heads, int64_t len, int64_t k, int32_t* slots);

// kv_compaction.cc. For each KV head h and i < k (slots [n_kv_heads, k] ascending per head):
// K and V of slot slots[h, i] go to slot i, with log-weight new_log_w[h, i] ([n_kv_heads, k])
// or, when new_log_w is null, the entry's own. freed (may be null) receives the pages the
// layer no longer needs: pages[ceil(k / page_size) .. ceil(len / page_size)), the ones the
// pool takes back.
void CompactKv(const PagedKv& kv, const int32_t* pages, int64_t len, const int32_t* slots, const float* new_log_w,
               int64_t k, std::vector<int32_t>* freed);

// evicted_mass.cc. The evicted entries' weight merged into the kept ones, out_log_w
// [n_kv_heads, k] for the kept slots [n_kv_heads, k] (ascending per head): every slot s < len
// with a finite log-weight adds exp(log_w[s]) to the kept entry of its head whose key is
// nearest (squared Euclidean distance; ties to the lower kept index), itself when kept; out is
// the log of each kept entry's sum (-inf when it is 0). A kept entry then stands for the
// entries like it in every later softmax, as a merge-reduce cluster's representative does.
// radius bounds "like it": an evicted key a whose nearest kept key b has
// ||a - b||^2 / max(||a||^2, 1e-20) > radius^2 carries nothing (its weight is dropped);
// +inf merges every evicted entry. merge_values: each kept entry's V (in its slot, before the
// compaction moves it) becomes the mean of the values merged into it, its own included,
// weighted as their weights: the representative's value for the keys it stands for, as
// merge-reduce's; the keys stay. Entries of weight 0 keep their V.
void MergeEvictedWeights(const PagedKv& kv, const int32_t* pages, int64_t len, const int32_t* slots, int64_t k,
                         float radius, bool merge_values, float* out_log_w);

// evicted_mass.cc. The CPU backend's form of MergeEvictedWeights: the same definition in
// float, each evicted key's nearest kept key found by NearestKeys (nearest_keys.h), the
// distances never stored.
void MergeEvictedWeightsTiled(const PagedKv& kv, const int32_t* pages, int64_t len, const int32_t* slots, int64_t k,
                              float radius, bool merge_values, float* out_log_w);

// kv_compaction.cc. dst[h, i] = src[h, slots[h, i]]; src [heads, src_stride], dst
// [heads, dst_stride] (not overlapping src), slots [heads, k].
void GatherPerHead(const float* src, int64_t src_stride, const int32_t* slots, int64_t heads, int64_t k, float* dst,
                   int64_t dst_stride);

// The element offset (in [num_pages, page_size, n_kv_heads] units) of slot s of head h.
inline int64_t KvOffset(const PagedKv& kv, const int32_t* pages, int64_t s, int64_t h) {
  return (static_cast<int64_t>(pages[s / kv.page_size]) * kv.page_size + s % kv.page_size) * kv.n_kv_heads + h;
}

}  // namespace kvserve::cpu
