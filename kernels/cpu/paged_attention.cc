// Attention over paged KV on the CPU: writes new entries, then softmax(q k^T * scale + log_w) v.
// A task is a tile of query rows of one sequence, one KV head and a key range: each key is
// read once for the tile's rows and all query heads of the group, in blocks with an online
// softmax (FlashAttention's order). Long key ranges with few tokens (decode) are split so
// every thread has work; a second loop merges the splits' states, as flash-decoding does.
#include <cblas.h>
#include <omp.h>
#ifdef __AVX2__
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/attention_dots.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/prefetch.h"
#include "kernels/kv_rows.h"

namespace kvserve::cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// Splits shorter than this cost more in merging and scheduling than they save.
constexpr int64_t kMinSplitKeys = 128;
// Batch-invariant attention splits every key range at multiples of this (rounded up to whole
// pages), whatever the batch, so a row's reduction order depends only on its own position.
constexpr int64_t kInvariantSplitKeys = 256;

// Slot s of a sequence lives in page page_list[s / page_size] at offset s % page_size.
inline int64_t SlotIndex(const PagedKv& kv, const int32_t* page_list, int64_t s) {
  return static_cast<int64_t>(page_list[s / kv.page_size]) * kv.page_size + s % kv.page_size;
}

// Calls fn(first_slot_index, offset_in_range, count) for the runs of slots [begin, end) that
// are contiguous in memory, so the inner loops step through it without a division. A run
// spans consecutive page ids (page p + 1 starts where page p ends), which is how the pool
// hands out a prefill chunk's pages, so runs are usually far longer than one page.
template <typename Fn>
inline void ForEachPageRun(const PagedKv& kv, const int32_t* pages, int64_t begin, int64_t end, Fn&& fn) {
  for (int64_t s = begin; s < end;) {
    const int64_t page = s / kv.page_size, off = s % kv.page_size;
    int64_t last = page;  // the run's last page
    while ((last + 1) * kv.page_size < end && pages[last + 1] == pages[last] + 1) ++last;
    const int64_t n = std::min((last + 1) * kv.page_size, end) - s;
    fn(static_cast<int64_t>(pages[page]) * kv.page_size + off, s - begin, n);
    s += n;
  }
}

// Asks for the K (or V: base) rows of KV heads [g, g + n_g) of keys [s0, s1), wherever their
// pages are, all at once: the fallback of ForEachSubRun below.
inline void PrefetchKvRows(const PagedKv& kv, const int32_t* pages, const void* base, int64_t g, int64_t n_g,
                           int64_t s0, int64_t s1) {
  const int64_t elem = kv.ElementBytes();
  const int64_t row = kv.n_kv_heads * kv.head_dim * elem, part = n_g * kv.head_dim * elem;
  ForEachPageRun(kv, pages, s0, s1, [&](int64_t slot, int64_t, int64_t run) {
    const uint8_t* first = static_cast<const uint8_t*>(base) + slot * row + g * kv.head_dim * elem;
    if (part == row) return PrefetchKv(first, 0, run * row);  // all heads: one contiguous span
    for (int64_t i = 0; i < run; ++i) PrefetchKv(first, i * row, part);
  });
}

// Calls fn(first_slot_index, offset_in_range, count, prefetch_offset) for the keys [begin,
// end) of KV heads [g, g + n_g) (K or V: base) in runs contiguous in memory and at most kSubRun
// keys long (one head's runs too: one offset serves a run only while its target keys are
// contiguous, which a short run makes likely). prefetch_offset (for the kernels,
// attention_dots.h) points each key's row at the row of the key KvPrefetchDistance() further
// on (below limit, the task's end), in whichever page holds it, so the kernels ask for it
// while they read: the kernels alone asked for the row that follows in memory, which in a
// fragmented pool is another sequence's or nobody's (a 65,536-key decode step with every 7th
// page ran 7.1 ms, 4.1 ms with this, 5.6 ms with no prefetch). When those keys are not one
// contiguous run they are asked for all at once before fn (such a burst, on Zen 2, does about
// as much as no prefetch: most of it is lost).
// With several KV heads (decode) fn reads a run's rows head after head: a short run's rows
// (all heads) are still in L1 when the next head reads its part of them, so each slot's K (or
// V) row streams from DRAM once, in order (whole-block runs had each head's pass read every
// third piece of 48 KB rows, over again from L2 for each head). Every kernel fn calls gives
// the same bits however its keys are cut into runs.
constexpr int64_t kSubRun = 24;
template <typename Fn>
inline void ForEachSubRun(const PagedKv& kv, const int32_t* pages, const void* base, int64_t g, int64_t n_g,
                          int64_t begin, int64_t end, int64_t limit, Fn&& fn) {
  const int64_t ahead = KvPrefetchDistance();
  const int64_t row_bytes = kv.n_kv_heads * kv.head_dim * kv.ElementBytes();
  ForEachPageRun(kv, pages, begin, end, [&](int64_t slot, int64_t at, int64_t run) {
    for (int64_t s = 0; s < run; s += kSubRun) {
      const int64_t n = std::min(kSubRun, run - s);
      const int64_t next = begin + at + s + ahead;  // the first key whose rows this run asks for
      int64_t prefetch_offset = 0;
      if (ahead > 0 && next < limit) {
        const int64_t last = std::min(next + n, limit) - 1;
        const int64_t to = SlotIndex(kv, pages, next);
        if (SlotIndex(kv, pages, last) - to == last - next) {
          prefetch_offset = (to - (slot + s)) * row_bytes;
        } else {
          PrefetchKvRows(kv, pages, base, g, n_g, next, last + 1);
        }
      }
      fn(slot + s, at + s, n, prefetch_offset);
    }
  });
}

// One task: query rows [token, token + n_tokens) of sequence seq, all heads of the groups of
// KV heads [g, g + n_g), against keys [begin, end). Query row token + i sees keys below
// visible0 + i. A decode token takes every KV head in one task (n_g = n_kv): a slot's K (and
// V) rows of all heads are adjacent, so its keys are then read as one sequential stream; one
// task per KV head read every third 128-byte piece of it, which streamed from DRAM at half
// the rate (docs/PERF.md, eighth session). Prefill tiles keep one KV head per task (n_g = 1):
// their sgemm runs per head.
struct Task {
  int32_t seq;
  int32_t token;
  int32_t n_tokens;
  int32_t g;
  int32_t n_g;
  int32_t begin;
  int32_t end;
  int32_t visible0;
};

// The online-softmax state of a task's rows (row = (i * n_g + gg) * group + h for query token
// i, KV head g + gg, head h of its group):
// m the largest logit so far, l the sum of exp(logit - m), acc the sum of exp(logit - m) * v.
// m = -inf while a row has seen no weighted key; then l and acc are 0.
struct RowState {
  float* m;    // [rows]
  float* l;    // [rows]
  float* acc;  // [rows, head_dim]
};

// Keys are taken kKeyBlock at a time: the block's logits for every row stay in L1/L2 while
// the state is updated and the values accumulated.
constexpr int64_t kKeyBlock = 128;

// Rows of K or V of KV head g for keys [b0, b1), widened to fp32, into buf [b1 - b0, hd].
void GatherKeys(const PagedKv& kv, const int32_t* pages, const void* base, int64_t g, int64_t b0, int64_t b1,
                float* buf) {
  ForEachPageRun(kv, pages, b0, b1, [&](int64_t slot, int64_t at, int64_t run) {
    for (int64_t i = 0; i < run; ++i) ReadKvRow(kv, base, (slot + i) * kv.n_kv_heads + g, buf + (at + i) * kv.head_dim);
  });
}

// Adds a block's log weights to a row's logits (when lw is given) and returns the larger of mx
// and the row's largest logit, eight lanes at a time: written as a plain loop, GCC kept it
// scalar (one dependent vmaxss per key), which took 14% of a 4K prefill chunk's attention.
// A max is exact, so the lanes give the same result as one running max.
inline float AddLogWeightsAndMax(float* logits, const float* lw, int64_t n, float mx) {
  int64_t j = 0;
#ifdef __AVX2__
  __m256 lanes = _mm256_set1_ps(mx);
  for (; j + 8 <= n; j += 8) {
    __m256 x = _mm256_loadu_ps(logits + j);
    if (lw != nullptr) {
      x = _mm256_add_ps(x, _mm256_loadu_ps(lw + j));
      _mm256_storeu_ps(logits + j, x);
    }
    lanes = _mm256_max_ps(lanes, x);
  }
  alignas(32) float lane[8];
  _mm256_store_ps(lane, lanes);
  for (const float v : lane) mx = std::max(mx, v);
#endif
  for (; j < n; ++j) {
    if (lw != nullptr) logits[j] += lw[j];
    mx = std::max(mx, logits[j]);
  }
  return mx;
}

// A tile with at least this many rows (query tokens x heads of the group) computes its logits
// and outputs with sgemm on keys and values gathered per block; fewer rows (decode) read the
// pages in place with the AVX2 loops, where a gather would cost more than it saves.
constexpr int64_t kGemmRows = 16;

void AttendTask(const PagedKv& kv, const int32_t* pages, const Task& task, const float* q, int64_t n_heads,
                int64_t group, float scale, bool gemm_allowed, std::vector<float>& logits,
                std::vector<float>& scratch, RowState st) {
  const int64_t hd = kv.head_dim;
  const int64_t n_kv = kv.n_kv_heads;
  const int64_t kv_row = n_kv * hd;
  const int64_t token_rows = task.n_g * group;  // a query token's rows in this task
  const int64_t rows = task.n_tokens * token_rows;
  const bool gemm = gemm_allowed && task.n_g == 1 && rows >= kGemmRows;
  std::fill(st.m, st.m + rows, kNegInf);
  std::fill(st.l, st.l + rows, 0.0f);
  std::fill(st.acc, st.acc + rows * hd, 0.0f);
  logits.resize(static_cast<size_t>(rows * kKeyBlock));
  float *q_tile = nullptr, *block = nullptr, *block_lw = nullptr;
  if (gemm) {
    // The tile's query rows contiguous [rows, hd] (a token's group heads already are), a
    // [kKeyBlock, hd] buffer for the block's keys, then its values, and the block's log weights.
    scratch.resize(static_cast<size_t>((rows + kKeyBlock) * hd + kKeyBlock));
    q_tile = scratch.data();
    block = q_tile + rows * hd;
    block_lw = block + kKeyBlock * hd;
    for (int64_t i = 0; i < task.n_tokens; ++i) {
      std::copy_n(q + ((task.token + i) * n_heads + task.g * group) * hd, group * hd, q_tile + i * group * hd);
    }
  }
  for (int64_t b0 = task.begin; b0 < task.end; b0 += kKeyBlock) {
    const int64_t b1 = std::min<int64_t>(task.end, b0 + kKeyBlock);
    const int64_t n = b1 - b0;
    if (gemm) {
      GatherKeys(kv, pages, kv.k, task.g, b0, b1, block);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, n, hd, scale, q_tile, hd, block, hd, 0.0f,
                  logits.data(), kKeyBlock);
      // The keys' log weights, strided by n_kv in the pages, gathered once for all rows.
      ForEachPageRun(kv, pages, b0, b1, [&](int64_t slot, int64_t at, int64_t run) {
        const float* lw = kv.log_w + slot * n_kv + task.g;
        for (int64_t j = 0; j < run; ++j) block_lw[at + j] = lw[j * n_kv];
      });
    } else {
      ForEachSubRun(kv, pages, kv.k, task.g, task.n_g, b0, b1, task.end,
                    [&](int64_t slot, int64_t at, int64_t run, int64_t prefetch_offset) {
                      for (int64_t gg = 0; gg < task.n_g; ++gg) {
                        const int64_t g = task.g + gg;
                        const void* k =
                            static_cast<const uint8_t*>(kv.k) + (slot * kv_row + g * hd) * kv.ElementBytes();
                        const float* lw = kv.log_w + slot * n_kv + g;
                        for (int64_t i = 0; i < task.n_tokens; ++i) {
                          ScoreKeys(q + ((task.token + i) * n_heads + g * group) * hd, group, k, kv.dtype, kv_row, run,
                                    hd, scale, lw, n_kv, logits.data() + (i * token_rows + gg * group) * kKeyBlock + at,
                                    kKeyBlock, prefetch_offset);
                        }
                      }
                    });
    }
    for (int64_t i = 0; i < task.n_tokens; ++i) {
      // Keys of this block query row i may see: the rest are masked (causal), given weight 0,
      // and left out of the sum, so the row's sum is the same whichever rows share its tile.
      const int64_t seen = std::clamp<int64_t>(task.visible0 + i - b0, 0, n);
      for (int64_t h = 0; h < token_rows; ++h) {
        const int64_t r = i * token_rows + h;
        float* lr = logits.data() + r * kKeyBlock;
        std::fill(lr + seen, lr + n, 0.0f);
        const float mx = AddLogWeightsAndMax(lr, block_lw, seen, st.m[r]);
        // Zero-weight entries (log_w = -inf, merge-reduce padding) drop out as exp(-inf) = 0;
        // a row with no weighted entry yet would give -inf - -inf = NaN, so it is skipped.
        if (mx == kNegInf) {
          std::fill(lr, lr + n, 0.0f);
          continue;
        }
        const float block_sum = ExpShiftedSum(lr, seen, mx);
        if (st.m[r] != mx && st.m[r] != kNegInf) {
          const float c = std::exp(st.m[r] - mx);
          st.l[r] *= c;
          for (int64_t d = 0; d < hd; ++d) st.acc[r * hd + d] *= c;
        }
        st.l[r] += block_sum;
        st.m[r] = mx;
      }
    }
    if (gemm) {
      GatherKeys(kv, pages, kv.v, task.g, b0, b1, block);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hd, n, 1.0f, logits.data(), kKeyBlock, block, hd,
                  1.0f, st.acc, hd);
    } else if (task.n_g == 1) {
      // All the task's rows (its tokens x the group's heads) share each value row.
      ForEachSubRun(kv, pages, kv.v, task.g, 1, b0, b1, task.end,
                    [&](int64_t slot, int64_t at, int64_t run, int64_t prefetch_offset) {
                      const void* v =
                          static_cast<const uint8_t*>(kv.v) + (slot * kv_row + task.g * hd) * kv.ElementBytes();
                      AccumulateValues(logits.data() + at, kKeyBlock, rows, v, kv.dtype, kv_row, run, hd, st.acc,
                                       prefetch_offset);
                    });
    } else {
      ForEachSubRun(kv, pages, kv.v, task.g, task.n_g, b0, b1, task.end,
                    [&](int64_t slot, int64_t at, int64_t run, int64_t prefetch_offset) {
                      for (int64_t gg = 0; gg < task.n_g; ++gg) {
                        const void* v = static_cast<const uint8_t*>(kv.v) +
                                        (slot * kv_row + (task.g + gg) * hd) * kv.ElementBytes();
                        for (int64_t i = 0; i < task.n_tokens; ++i) {
                          const int64_t r0 = i * token_rows + gg * group;
                          AccumulateValues(logits.data() + r0 * kKeyBlock + at, kKeyBlock, group, v, kv.dtype, kv_row,
                                           run, hd, st.acc + r0 * hd, prefetch_offset);
                        }
                      }
                    });
    }
  }
}

// out[hd] = the merged, normalised output of one query row from its splits' states: split c's
// are m[c * stride], l[c * stride] and acc[c * stride * hd, + hd). One split just normalises.
void MergeSplits(const float* m, const float* l, const float* acc, int64_t n_splits, int64_t stride, int64_t hd,
                 float* out) {
  float mx = kNegInf;
  for (int64_t c = 0; c < n_splits; ++c) mx = std::max(mx, m[c * stride]);
  std::fill(out, out + hd, 0.0f);
  if (mx == kNegInf) return;  // no weighted entry at all: zeros, not NaN
  float total = 0.0f;
  for (int64_t c = 0; c < n_splits; ++c) {
    if (m[c * stride] == kNegInf) continue;
    const float f = std::exp(m[c * stride] - mx);
    total += l[c * stride] * f;
    const float* a = acc + c * stride * hd;
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
      for (int64_t h = 0; h < kv.n_kv_heads; ++h) {
        WriteKvRow(kv, kv.k, slot * kv.n_kv_heads + h, k + t * row + h * kv.head_dim);
        WriteKvRow(kv, kv.v, slot * kv.n_kv_heads + h, v + t * row + h * kv.head_dim);
      }
      std::fill_n(kv.log_w + slot * kv.n_kv_heads, kv.n_kv_heads, 0.0f);
    }
  }
}

void PagedAttention(const PagedKv& kv, const AttentionBatch& batch, const AttentionShape& shape,
                    const float* q, float* out, Determinism determinism) {
  const bool invariant = determinism == Determinism::kBatchInvariant;
  const int64_t hd = kv.head_dim;
  const int64_t n_kv = kv.n_kv_heads;
  const int64_t group = shape.n_heads / n_kv;
  const int64_t n_tokens = batch.q_indptr[batch.n_seqs];
  if (n_tokens == 0) return;
  UseSingleThreadedBlas();

  // A unit is a tile of up to kTileTokens consecutive query rows of one sequence and one KV
  // head (a decode token: all KV heads, see Task): its keys are read once for all of them
  // (prefill attention would otherwise stream the whole prefix from L3 per query row). Few
  // units — batch-1 decode has only one — would leave threads idle, so then each unit's keys
  // are split into ranges, two tasks for every thread (see want_tasks); whole pages long, at
  // least kMinSplitKeys.
  // 64 tokens give SmolLM2's group of three heads 192-row sgemms; 16 ran a 4K prefill chunk's
  // attention 13% slower, 128 no faster (docs/PERF.md, tenth session).
  constexpr int64_t kTileTokens = 64;
  const auto kv_heads_per_unit = [&](int32_t tile_tokens) -> int32_t {
    return tile_tokens == 1 && group < kGemmRows ? static_cast<int32_t>(n_kv) : 1;
  };
  int64_t units = 0;
  for (int32_t s = 0; s < batch.n_seqs; ++s) {
    const int32_t n_q = batch.q_indptr[s + 1] - batch.q_indptr[s];
    for (int32_t i0 = 0; i0 < n_q; i0 += kTileTokens) {
      units += n_kv / kv_heads_per_unit(std::min<int32_t>(kTileTokens, n_q - i0));
    }
  }
  // Two tasks per thread: batch-1 decode at 4K ran 3-4% faster than with four (fewer, longer
  // streams through the pages and fewer states to merge); one leaves a thread idle.
  const int64_t want_tasks = 2 * static_cast<int64_t>(omp_get_max_threads());
  const int64_t splits_per_unit = units >= want_tasks ? 1 : (want_tasks + units - 1) / units;
  const int64_t invariant_split = (kInvariantSplitKeys + kv.page_size - 1) / kv.page_size * kv.page_size;

  std::vector<Task> tasks;
  std::vector<int32_t> unit_first;  // tasks of unit u: [unit_first[u], unit_first[u + 1])
  for (int32_t s = 0; s < batch.n_seqs; ++s) {
    const int32_t n_q = batch.q_indptr[s + 1] - batch.q_indptr[s];
    for (int32_t i0 = 0; i0 < n_q; i0 += kTileTokens) {
      const int32_t nt = std::min<int32_t>(kTileTokens, n_q - i0);
      const int32_t visible0 = batch.kv_len[s] - n_q + i0 + 1;
      const int64_t end = visible0 + nt - 1;  // what the tile's last row sees
      int64_t split = end;
      if (invariant) {
        split = invariant_split;
      } else if (splits_per_unit > 1) {
        split = std::max(kMinSplitKeys, (end + splits_per_unit - 1) / splits_per_unit);
        split = (split + kv.page_size - 1) / kv.page_size * kv.page_size;
      }
      const int32_t n_g = kv_heads_per_unit(nt);
      for (int32_t g = 0; g < n_kv; g += n_g) {
        unit_first.push_back(static_cast<int32_t>(tasks.size()));
        for (int64_t b = 0; b < end; b += split) {
          tasks.push_back({s, batch.q_indptr[s] + i0, nt, g, n_g, static_cast<int32_t>(b),
                           static_cast<int32_t>(std::min(end, b + split)), visible0});
        }
      }
    }
  }
  unit_first.push_back(static_cast<int32_t>(tasks.size()));
  const int64_t n_tasks = static_cast<int64_t>(tasks.size());

  // Every task leaves its rows' states here; a second loop merges each unit's splits (or
  // normalises its one task) into out. The splits of a unit have the same rows, so split c of
  // a unit starting at task f holds rows at state_row[f] + (c - f) * rows.
  std::vector<int64_t> state_row(static_cast<size_t>(n_tasks + 1), 0);
  for (int64_t i = 0; i < n_tasks; ++i) state_row[i + 1] = state_row[i] + tasks[i].n_tokens * tasks[i].n_g * group;
  std::vector<float> m(static_cast<size_t>(state_row[n_tasks])), l(m.size()), acc(m.size() * hd);
#pragma omp parallel
  {
    std::vector<float> logits, scratch;
    // Later tiles of a sequence see more keys: the largest tasks go first.
#pragma omp for schedule(dynamic, 1)
    for (int64_t j = 0; j < n_tasks; ++j) {
      const int64_t i = n_tasks - 1 - j;
      const Task& task = tasks[i];
      const int64_t r0 = state_row[i];
      AttendTask(kv, batch.page_indices + batch.page_indptr[task.seq], task, q, shape.n_heads, group, shape.scale,
                 !invariant, logits, scratch, {m.data() + r0, l.data() + r0, acc.data() + r0 * hd});
    }
#pragma omp for schedule(static)
    for (int64_t u = 0; u < units; ++u) {
      const Task& first = tasks[unit_first[u]];
      const int64_t token_rows = first.n_g * group;
      const int64_t rows = first.n_tokens * token_rows, r0 = state_row[unit_first[u]];
      for (int64_t r = 0; r < rows; ++r) {
        MergeSplits(m.data() + r0 + r, l.data() + r0 + r, acc.data() + (r0 + r) * hd, unit_first[u + 1] - unit_first[u],
                    rows, hd,
                    out + ((first.token + r / token_rows) * shape.n_heads + first.g * group + r % token_rows) * hd);
      }
    }
  }
}

}  // namespace kvserve::cpu
