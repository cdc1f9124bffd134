// Attention over paged KV on the CPU: writes new entries, then softmax(q k^T * scale + log_w) v.
// A task is one (query token, KV head, key range): each key is read once for all query heads
// of its group. Long key ranges with few tokens (decode) are split so every thread has work,
// each split keeping an online-softmax state (max, sum, unnormalised output) that a second
// loop merges, as flash-decoding does on GPUs.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/attention_dots.h"
#include "kernels/cpu/cpu_ops.h"

namespace kvserve::cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// Splits shorter than this cost more in merging and scheduling than they save.
constexpr int64_t kMinSplitKeys = 128;

// Slot s of a sequence lives in page page_list[s / page_size] at offset s % page_size.
inline int64_t SlotIndex(const PagedKv& kv, const int32_t* page_list, int64_t s) {
  return static_cast<int64_t>(page_list[s / kv.page_size]) * kv.page_size + s % kv.page_size;
}

// Calls fn(first_slot_index, offset_in_range, count) for the runs of slots [begin, end) that
// are contiguous in one page, so the inner loops step through memory without a division.
template <typename Fn>
inline void ForEachPageRun(const PagedKv& kv, const int32_t* pages, int64_t begin, int64_t end, Fn&& fn) {
  for (int64_t s = begin; s < end;) {
    const int64_t off = s % kv.page_size;
    const int64_t n = std::min(kv.page_size - off, end - s);
    fn(static_cast<int64_t>(pages[s / kv.page_size]) * kv.page_size + off, s - begin, n);
    s += n;
  }
}

// One task's work: query token t's heads [h0, h0 + heads) against KV head g's keys [begin, end).
struct Task {
  int32_t token;
  int32_t g;
  int32_t begin;
  int32_t end;
};

// The online-softmax state of one query head over a task's keys: m the largest logit, l the
// sum of exp(logit - m), acc the sum of exp(logit - m) * v. m = -inf when every key of the
// range has weight 0; then l and acc are 0.
struct SplitState {
  float* m;    // [heads]
  float* l;    // [heads]
  float* acc;  // [heads, head_dim]
};

void AttendRange(const PagedKv& kv, const int32_t* pages, const Task& task, const float* q, int64_t heads,
                 float scale, std::vector<float>& logits, SplitState st) {
  const int64_t hd = kv.head_dim;
  const int64_t n_kv = kv.n_kv_heads;
  const int64_t kv_row = n_kv * hd;
  const int64_t len = task.end - task.begin;
  logits.resize(static_cast<size_t>(heads * len));
  ForEachPageRun(kv, pages, task.begin, task.end, [&](int64_t slot, int64_t at, int64_t n) {
    ScoreKeys(q, heads, kv.k + slot * kv_row + task.g * hd, kv_row, n, hd, scale, kv.log_w + slot * n_kv + task.g,
              n_kv, logits.data() + at, len);
  });
  for (int64_t h = 0; h < heads; ++h) {
    float* lh = logits.data() + h * len;
    const float mx = *std::max_element(lh, lh + len);
    st.m[h] = mx;
    // Zero-weight entries (log_w = -inf, merge-reduce padding) drop out as exp(-inf) = 0;
    // only a range with no weighted entry at all would give -inf - -inf = NaN.
    if (mx == kNegInf) {
      std::fill(lh, lh + len, 0.0f);
      st.l[h] = 0.0f;
      continue;
    }
    st.l[h] = ExpShiftedSum(lh, len, mx);
  }
  std::fill(st.acc, st.acc + heads * hd, 0.0f);
  ForEachPageRun(kv, pages, task.begin, task.end, [&](int64_t slot, int64_t at, int64_t n) {
    AccumulateValues(logits.data() + at, len, heads, kv.v + slot * kv_row + task.g * hd, kv_row, n, hd, st.acc);
  });
}

// out[hd] = the merged, normalised output of one query head from its splits' states.
void MergeSplits(const float* m, const float* l, const float* acc, int64_t n_splits, int64_t stride_ml,
                 int64_t stride_acc, int64_t hd, float* out) {
  float mx = kNegInf;
  for (int64_t c = 0; c < n_splits; ++c) mx = std::max(mx, m[c * stride_ml]);
  std::fill(out, out + hd, 0.0f);
  if (mx == kNegInf) return;  // no weighted entry at all: zeros, not NaN
  float total = 0.0f;
  for (int64_t c = 0; c < n_splits; ++c) {
    if (m[c * stride_ml] == kNegInf) continue;
    const float f = std::exp(m[c * stride_ml] - mx);
    total += l[c * stride_ml] * f;
    const float* a = acc + c * stride_acc;
#pragma omp simd
    for (int64_t d = 0; d < hd; ++d) out[d] += f * a[d];
  }
  const float inv = 1.0f / total;
  for (int64_t d = 0; d < hd; ++d) out[d] *= inv;
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
  const int64_t n_tokens = batch.q_indptr[batch.n_seqs];
  if (n_tokens == 0) return;

  // Few (token, KV head) pairs — batch-1 decode has only n_kv of them — would leave threads
  // idle, so then each pair's keys are split into about enough ranges to give every thread
  // several tasks. Splits are whole pages long, and at least kMinSplitKeys.
  const int64_t pairs = n_tokens * n_kv;
  const int64_t want_tasks = 4 * static_cast<int64_t>(omp_get_max_threads());
  const int64_t splits_per_pair = pairs >= want_tasks / 2 ? 1 : (want_tasks + pairs - 1) / pairs;

  std::vector<Task> tasks;
  std::vector<int32_t> pair_first(static_cast<size_t>(pairs + 1));  // tasks of pair p: [first[p], first[p+1])
  std::vector<int32_t> seq_of_token(static_cast<size_t>(n_tokens));
  for (int32_t s = 0; s < batch.n_seqs; ++s) {
    const int64_t n_q = batch.q_indptr[s + 1] - batch.q_indptr[s];
    for (int64_t i = 0; i < n_q; ++i) {
      const int32_t t = batch.q_indptr[s] + static_cast<int32_t>(i);
      seq_of_token[t] = s;
      const int64_t visible = batch.kv_len[s] - n_q + i + 1;
      int64_t split = visible;
      if (splits_per_pair > 1) {
        split = std::max(kMinSplitKeys, (visible + splits_per_pair - 1) / splits_per_pair);
        split = (split + kv.page_size - 1) / kv.page_size * kv.page_size;
      }
      for (int32_t g = 0; g < n_kv; ++g) {
        pair_first[t * n_kv + g] = static_cast<int32_t>(tasks.size());
        for (int64_t b = 0; b < visible; b += split) {
          tasks.push_back({t, g, static_cast<int32_t>(b), static_cast<int32_t>(std::min(visible, b + split))});
        }
      }
    }
  }
  pair_first[pairs] = static_cast<int32_t>(tasks.size());
  const int64_t n_tasks = static_cast<int64_t>(tasks.size());
  const bool split = n_tasks > pairs;

  // Unsplit tasks normalise straight into out; split ones leave their states for the merge.
  std::vector<float> m, l, acc;
  if (split) {
    m.resize(static_cast<size_t>(n_tasks * group));
    l.resize(m.size());
    acc.resize(static_cast<size_t>(n_tasks * group * hd));
  }
#pragma omp parallel
  {
    std::vector<float> logits;
    std::vector<float> own_m(static_cast<size_t>(group)), own_l(own_m.size());
#pragma omp for schedule(dynamic, 1)
    for (int64_t i = 0; i < n_tasks; ++i) {
      const Task& task = tasks[i];
      const int32_t s = seq_of_token[task.token];
      const int32_t* pages = batch.page_indices + batch.page_indptr[s];
      const int64_t h0 = task.g * group;
      const float* qh = q + (task.token * shape.n_heads + h0) * hd;
      float* o = out + (task.token * shape.n_heads + h0) * hd;
      if (split) {
        AttendRange(kv, pages, task, qh, group, shape.scale, logits,
                    {m.data() + i * group, l.data() + i * group, acc.data() + i * group * hd});
      } else {
        AttendRange(kv, pages, task, qh, group, shape.scale, logits, {own_m.data(), own_l.data(), o});
        for (int64_t h = 0; h < group; ++h) {
          const float inv = own_m[h] == kNegInf ? 0.0f : 1.0f / own_l[h];
          for (int64_t d = 0; d < hd; ++d) o[h * hd + d] *= inv;
        }
      }
    }
    if (split) {
#pragma omp for schedule(static)
      for (int64_t p = 0; p < pairs; ++p) {
        const int64_t t = p / n_kv, g = p % n_kv;
        const int64_t first = pair_first[p], n = pair_first[p + 1] - first;
        for (int64_t h = 0; h < group; ++h) {
          MergeSplits(m.data() + first * group + h, l.data() + first * group + h,
                      acc.data() + (first * group + h) * hd, n, group, group * hd, hd,
                      out + (t * shape.n_heads + g * group + h) * hd);
        }
      }
    }
  }
}

}  // namespace kvserve::cpu
