#include "engine/compress/merge_reduce.h"

#include <algorithm>
#include <bit>
#include <limits>

#include "engine/compress/compaction.h"
#include "engine/compress/random_sample_reducer.h"

namespace kvserve {

int64_t MergeReduceBuckets::Advance(int64_t len, const std::function<void(int64_t begin)>& reduce) {
  const int64_t k = shape_.k;
  while (Due(len)) {
    reduce(raw_begin());  // the oldest 2k raw entries become a level-0 bucket
    len -= k;
    levels_.push_back(0);
    // Carry: two buckets of one level merge into the next (the top level into itself).
    while (levels_.size() >= 2 && levels_[levels_.size() - 1] == levels_[levels_.size() - 2]) {
      const int32_t level = levels_.back();
      reduce(raw_begin() - 2 * k);
      len -= k;
      levels_.pop_back();
      levels_.back() = static_cast<int32_t>(std::min<int64_t>(level + 1, shape_.max_level));
    }
  }
  return len;
}

int64_t MergeReduceBuckets::SteadyBound(const MergeReduceShape& s, int64_t n) {
  // c level-0 reductions (c <= C) leave buckets whose levels strictly decrease, and a bucket
  // of level j stands for at least 2^j of them, so there are at most floor(log2 C) + 1; then
  // fewer than 2k raw entries, the window and the sinks.
  const int64_t c = std::max<int64_t>(0, n - s.window - s.sinks) / (2 * s.k);
  if (c == 0) return n;
  const int64_t buckets = std::min<int64_t>(s.max_level + 1, std::bit_width(static_cast<uint64_t>(c)));
  return std::min(n, s.sinks + s.k * buckets + 2 * s.k - 1 + s.window);
}

MergeReduceShape MergeReduceShapeForBudget(int64_t budget, int64_t window, int64_t n, int64_t sinks,
                                           int64_t max_level) {
  MergeReduceShape s{1, window, max_level, sinks};
  // A bucket of n entries is never filled (2k raw entries make one), so every k >= n keeps
  // the whole sequence alike: starting at n bounds this search, and the one in
  // MergeReduceShapeForPrompt, by the sequence, not by a budget a request may set to 3e9.
  for (int64_t k = std::clamp<int64_t>(budget, 1, std::max<int64_t>(1, n)); k >= 1; --k) {
    s.k = k;
    if (MergeReduceBuckets::SteadyBound(s, n) <= budget) return s;
  }
  s.k = 1;
  return s;
}

int64_t EntriesAfterPrompt(const MergeReduceShape& s, int64_t prompt_len, int64_t step) {
  MergeReduceBuckets b(s);
  int64_t len = 0;
  step = std::max<int64_t>(1, step);
  for (int64_t pos = 0; pos < prompt_len; pos += step) {
    len = b.Advance(len + std::min(step, prompt_len - pos), [](int64_t) {});
  }
  return len;
}

MergeReduceShape MergeReduceShapeForPrompt(int64_t budget, int64_t window, int64_t n, int64_t sinks,
                                           int64_t prompt_len, int64_t step) {
  const MergeReduceShape largest = MergeReduceShapeForBudget(budget, window, n, sinks);
  MergeReduceShape best = largest;
  int64_t best_entries = EntriesAfterPrompt(largest, prompt_len, step);
  // A smaller k never raises the steady bound (fewer entries per bucket outweigh the extra
  // level), so every k below the largest fits too; half of it is as far as it pays to look.
  for (int64_t k = largest.k - 1; k >= std::max<int64_t>(1, largest.k / 2); --k) {
    MergeReduceShape s = largest;
    s.k = k;
    if (MergeReduceBuckets::SteadyBound(s, n) > budget) continue;
    const int64_t entries = EntriesAfterPrompt(s, prompt_len, step);
    if (entries > best_entries) {
      best = s;
      best_entries = entries;
    }
  }
  return best;
}

MergeReduce::MergeReduce(std::unique_ptr<Reducer> reducer, std::vector<MergeReduceShape> shapes, uint64_t seed)
    : reducer_(std::move(reducer)), reductions_(shapes.size(), 0), seed_(seed) {
  for (const MergeReduceShape& s : shapes) buckets_.emplace_back(s);
}

Selection PlanMergeReduce(const Reducer& reducer, MergeReduceBuckets& b, const LayerKv& layer, uint64_t seed,
                          uint64_t* counter, int64_t* steps) {
  const int64_t len = layer.len, heads = layer.kv.n_kv_heads, k = b.shape().k;
  // Each head's entries as (original slot, log-weight): REDUCE steps rewrite these lists and
  // only the final compaction moves K/V, so a chain of carries costs one compaction.
  std::vector<std::vector<WeightedEntry>> lists(static_cast<size_t>(heads));
  for (int64_t h = 0; h < heads; ++h) {
    lists[h].reserve(static_cast<size_t>(len));
    for (int64_t s = 0; s < len; ++s) lists[h].push_back({static_cast<int32_t>(s), layer.LogWeight(s, h)});
  }
  const int64_t new_len = b.Advance(len, [&](int64_t begin) {
    const uint64_t r = (*counter)++;
    ++*steps;
    // Heads one after another: a bucket is small, and an OpenMP region per REDUCE cost far
    // more than it saved on a busy machine.
    for (int64_t h = 0; h < heads; ++h) {
      std::vector<WeightedEntry>& list = lists[h];
      const absl::Span<const WeightedEntry> bucket = absl::MakeConstSpan(list).subspan(begin, 2 * k);
      std::vector<WeightedEntry> kept = reducer.Reduce(layer, h, bucket, k, MixSeed(seed, r, h));
      // Pad to k with zero-weight entries (unchosen slots of the bucket).
      auto by_slot = [](const WeightedEntry& x, const WeightedEntry& y) { return x.slot < y.slot; };
      const size_t chosen = kept.size();
      for (size_t i = 0; i < bucket.size() && static_cast<int64_t>(kept.size()) < k; ++i) {
        if (!std::binary_search(kept.begin(), kept.begin() + chosen, bucket[i], by_slot)) {
          kept.push_back({bucket[i].slot, -std::numeric_limits<float>::infinity()});
        }
      }
      std::sort(kept.begin(), kept.end(), by_slot);
      list.erase(list.begin() + begin, list.begin() + begin + 2 * k);
      list.insert(list.begin() + begin, kept.begin(), kept.end());
    }
  });
  Selection sel;
  sel.n_keep = new_len;
  for (const auto& list : lists) {
    for (const WeightedEntry& e : list) {
      sel.slots.push_back(e.slot);
      sel.log_w.push_back(e.log_w);
    }
  }
  return sel;
}

absl::StatusOr<int64_t> MergeReduce::ReduceLayer(Backend& backend, PagePool& pool, SequenceKv& seq, int64_t l) {
  MergeReduceBuckets& b = buckets_[l];
  if (!b.Due(seq.layer_len[l])) return 0;
  const LayerKv layer{pool.view(), seq.layer_pages[l], seq.layer_len[l]};
  int64_t steps = 0;
  const Selection sel = PlanMergeReduce(*reducer_, b, layer, MixSeed(seed_, static_cast<uint64_t>(l)),
                                        &reductions_[l], &steps);
  if (absl::Status st = CompactLayer(backend, pool, seq, l, sel); !st.ok()) return st;
  return steps;
}

}  // namespace kvserve
