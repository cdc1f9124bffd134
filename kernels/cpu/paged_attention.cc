// Attention over paged KV on the CPU: writes new entries, then softmax(q k^T * scale + log_w) v.
// One task per (query token, KV head): each key is read once for all query heads of its group.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_ops.h"

namespace kvserve::cpu {
namespace {

// Slot s of a sequence lives in page page_list[s / page_size] at offset s % page_size.
inline int64_t SlotIndex(const PagedKv& kv, const int32_t* page_list, int64_t s) {
  return static_cast<int64_t>(page_list[s / kv.page_size]) * kv.page_size + s % kv.page_size;
}

inline float Dot(const float* a, const float* b, int64_t n) {
  float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
  for (int64_t i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

}  // namespace

void WriteKv(const PagedKv& kv, const AttentionBatch& batch, const float* k, const float* v) {
  const int64_t row = kv.n_kv_heads * kv.head_dim;
  for (int32_t s = 0; s < batch.n_seqs; ++s) {
    const int32_t* pages = batch.page_indices + batch.page_indptr[s];
    const int64_t n_q = batch.q_indptr[s + 1] - batch.q_indptr[s];
    const int64_t first_slot = batch.kv_len[s] - n_q;
    for (int64_t i = 0; i < n_q; ++i) {
      const int64_t slot = SlotIndex(kv, pages, first_slot + i);
      const int64_t t = batch.q_indptr[s] + i;
      std::memcpy(kv.k + slot * row, k + t * row, sizeof(float) * row);
      std::memcpy(kv.v + slot * row, v + t * row, sizeof(float) * row);
      std::fill_n(kv.log_w + slot * kv.n_kv_heads, kv.n_kv_heads, 0.0f);
    }
  }
}

void PagedAttention(const PagedKv& kv, const AttentionBatch& batch, const AttentionShape& shape,
                    const float* q, float* out) {
  const int64_t hd = kv.head_dim;
  const int64_t n_kv = kv.n_kv_heads;
  const int64_t group = shape.n_heads / n_kv;
  const int64_t kv_row = n_kv * hd;
  const int64_t n_tokens = batch.q_indptr[batch.n_seqs];

  // Map each token to its sequence once so the parallel loop is flat over (token, kv head).
  std::vector<int32_t> seq_of(static_cast<size_t>(n_tokens));
  for (int32_t s = 0; s < batch.n_seqs; ++s) {
    std::fill(seq_of.begin() + batch.q_indptr[s], seq_of.begin() + batch.q_indptr[s + 1], s);
  }

  // Few (token, KV head) pairs — batch-1 decode has only n_kv of them — would leave threads
  // idle, so then each query head is its own task, at the price of re-reading its group's K/V.
  const int64_t heads_per_task = n_tokens * n_kv >= 2 * omp_get_max_threads() ? group : 1;
  const int64_t tasks_per_kv = group / heads_per_task;

#pragma omp parallel
  {
    std::vector<float> logits;  // [heads_per_task, visible]
    std::vector<float> acc(static_cast<size_t>(heads_per_task * hd));
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < n_tokens * n_kv * tasks_per_kv; ++task) {
      const int64_t t = task / (n_kv * tasks_per_kv);
      const int64_t g = task / tasks_per_kv % n_kv;
      const int64_t h0 = g * group + task % tasks_per_kv * heads_per_task;  // first query head
      const int32_t s = seq_of[t];
      const int32_t* pages = batch.page_indices + batch.page_indptr[s];
      const int64_t n_q = batch.q_indptr[s + 1] - batch.q_indptr[s];
      const int64_t visible = batch.kv_len[s] - n_q + (t - batch.q_indptr[s]) + 1;
      logits.resize(static_cast<size_t>(heads_per_task * visible));
      const float* qh = q + (t * shape.n_heads + h0) * hd;

      for (int64_t j = 0; j < visible; ++j) {
        const int64_t slot = SlotIndex(kv, pages, j);
        const float* kj = kv.k + slot * kv_row + g * hd;
        const float lw = kv.log_w[slot * n_kv + g];
        for (int64_t h = 0; h < heads_per_task; ++h) {
          logits[h * visible + j] = Dot(qh + h * hd, kj, hd) * shape.scale + lw;
        }
      }
      for (int64_t h = 0; h < heads_per_task; ++h) {
        float* lh = logits.data() + h * visible;
        const float mx = *std::max_element(lh, lh + visible);
        // Zero-weight entries (log_w = -inf, merge-reduce padding) drop out as exp(-inf) = 0;
        // only a row with no weighted entry at all would give -inf - -inf = NaN.
        if (mx == -std::numeric_limits<float>::infinity()) {
          std::fill(lh, lh + visible, 0.0f);
          continue;
        }
        float sum = 0.0f;
        for (int64_t j = 0; j < visible; ++j) {
          lh[j] = std::exp(lh[j] - mx);
          sum += lh[j];
        }
        const float inv = 1.0f / sum;
        for (int64_t j = 0; j < visible; ++j) lh[j] *= inv;
      }
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t j = 0; j < visible; ++j) {
        const float* vj = kv.v + SlotIndex(kv, pages, j) * kv_row + g * hd;
        for (int64_t h = 0; h < heads_per_task; ++h) {
          const float p = logits[h * visible + j];
          float* a = acc.data() + h * hd;
#pragma omp simd
          for (int64_t d = 0; d < hd; ++d) a[d] += p * vj[d];
        }
      }
      std::memcpy(out + (t * shape.n_heads + h0) * hd, acc.data(), sizeof(float) * heads_per_task * hd);
    }
  }
}

}  // namespace kvserve::cpu
