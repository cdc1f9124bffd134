// SequenceCompressor's merge-reduce path (buckets reduced after every step in place of
// quota-triggered selection), the prompt's compressibility estimate, and the budget that
// auto:RISK picks from it.
#include <algorithm>
#include <chrono>
#include <cmath>

#include "engine/compress/auto_budget.h"
#include "engine/compress/sequence_compressor.h"

namespace kvserve {
namespace {

constexpr int64_t kSinkSlots = 4;

}  // namespace

void SequenceCompressor::SetUpMergeReduce() {
  const ModelConfig& c = model_.config;
  estimated_len_.assign(static_cast<size_t>(c.n_layers), 0);
  // auto:RISK knows its budget only at the end of the prompt; until then every layer may
  // hold the whole prompt (prefill_end holds it anyway), which is what admission reserves.
  if (settings_.auto_risk > 0) quotas_.assign(static_cast<size_t>(c.n_layers), std::max<int64_t>(1, prompt_len_));
  BuildMergeReduce();
}

void SequenceCompressor::BuildMergeReduce() {
  if (!IsMergeReducePolicy(settings_.policy)) return;
  // A layer's quota is its steady-state size: a bucket size k whose bound over the whole
  // request (prompt + new tokens) fits the quota, the one that keeps most of the prompt.
  std::vector<MergeReduceShape> shapes;
  // Chunk mode reduces after every prefill chunk, prefill_end once after the whole prompt.
  const int64_t step = settings_.at == CompressAt::kChunk ? prefill_chunk_ : prompt_len_;
  for (int64_t q : quotas_) {
    shapes.push_back(MergeReduceShapeForPrompt(q, settings_.recent_window, prompt_len_ + max_new_, SinkTokens(settings_),
                                               prompt_len_, step));
  }
  const std::string_view kind = std::string_view(settings_.policy).substr(std::string_view("mergereduce:").size());
  merge_reduce_ = std::make_unique<MergeReduce>(MakeReducer(kind, ReduceProtectedDims(settings_)), std::move(shapes),
                                                settings_.reduce_seed);
}

int64_t SequenceCompressor::MergeReducePeakPages(bool decode_only) const {
  const int64_t n = prompt_len_ + max_new_;
  int64_t pages = 0;
  for (size_t l = 0; l < quotas_.size(); ++l) {
    // Between steps a layer holds at most `steady`; a step adds its tokens before reducing.
    const int64_t steady = MergeReduceBuckets::SteadyBound(merge_reduce_->shape(static_cast<int64_t>(l)), n);
    int64_t slots = std::min(n, steady + 1);
    if (!decode_only) {
      slots = std::max(slots, settings_.at == CompressAt::kChunk ? std::min(prompt_len_, steady + prefill_chunk_)
                                                                 : prompt_len_);
    }
    pages += PagesFor(slots);
  }
  return pages;
}

absl::Status SequenceCompressor::MergeReduceStep(Backend& backend, PagePool& pool, SequenceKv& seq, bool prompt_done) {
  using Clock = std::chrono::steady_clock;
  const bool prompt_end = prompt_done && !prompt_compressed_;
  // prefill_end defers the first reductions to the end of the prompt; chunk reduces as it reads.
  if (prompt_done || settings_.at == CompressAt::kChunk) {
    for (int64_t l = 0; l < static_cast<int64_t>(quotas_.size()); ++l) {
      const auto t0 = Clock::now();
      const int64_t before = seq.layer_len[l];
      absl::StatusOr<int64_t> steps = merge_reduce_->ReduceLayer(backend, pool, seq, l);
      if (!steps.ok()) return steps.status();
      if (*steps == 0) continue;
      stats_.select_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
      stats_.evicted_slots += before - seq.layer_len[l];
      ++stats_.compactions;
    }
  }
  if (prompt_end) {
    prompt_compressed_ = true;
    seq.ShrinkReservation(pool, DecodePeakPages());
  }
  estimated_len_ = seq.layer_len;
  return absl::OkStatus();
}

void SequenceCompressor::ApplyAutoBudget() {
  const ModelConfig& c = model_.config;
  // At least the window (merge-reduce: its recent entries) and the sinks, which every policy
  // keeps whatever the budget.
  const int64_t kept = IsMergeReducePolicy(settings_.policy) ? settings_.recent_window : settings_.window;
  const int64_t k = AutoBudgetTokens(compressibility_, settings_.auto_risk, kept + SinkTokens(settings_), prompt_len_);
  // A whole number of tokens: QuotasFor reads budgets above 1 as token counts.
  settings_.budget = k > 1 ? static_cast<double>(k) : 1.0;
  quotas_ = QuotasFor(BudgetOf(settings_), c.n_layers, prompt_len_, page_size_);
  BuildMergeReduce();
}

double SequenceCompressor::mean_quota() const {
  double sum = 0;
  for (int64_t q : quotas_) sum += static_cast<double>(std::min(q, prompt_len_ + max_new_));
  return quotas_.empty() ? 0 : sum / static_cast<double>(quotas_.size());
}

double SequenceCompressor::EstimatedRisk() const {
  if (compressibility_.empty()) return 0;
  return compressibility_.RiskAt(static_cast<int64_t>(std::lround(std::min(mean_quota(), static_cast<double>(prompt_len_)))));
}

void SequenceCompressor::ObservePrompt(Backend& backend, PagePool& pool, const SequenceKv& seq, bool prompt_done,
                                       int64_t probe) {
  if (prompt_compressed_) return;
  const ModelConfig& c = model_.config;
  // Made on the first prompt step, not with the compressor: a queued request holds none of
  // its moments and value sample, and a device pool (which skips the estimate) never does.
  if (!estimator_) estimator_ = std::make_unique<CompressibilityEstimator>(c.n_layers, c.n_kv_heads, c.head_dim);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    // The slots past what the estimator saw are this step's new entries (never compacted
    // yet). The first kSinkSlots are left out: attention-sink keys are outliers whose
    // variance would drown the spread of everything else.
    // (A question probe's trailing entries are not the prompt's: left out.)
    const int64_t len = seq.layer_len[l] - probe;
    const int64_t first = std::min(std::max(estimated_len_[l], kSinkSlots), len);
    estimator_->AddEntries(LayerKv{pool.view(), seq.layer_pages[l], len}, l, first, len - first, backend);
    // The queries of this step's newest tokens (the window keeps at most its capacity).
    estimator_->AddQueries(window_, l, len - estimated_len_[l], c.n_heads, backend);
  }
  if (prompt_done) {
    compressibility_ = estimator_->Estimate(1.0f / std::sqrt(static_cast<float>(c.head_dim)));
    // AfterStep compresses right after this, with the quotas picked here.
    if (settings_.auto_risk > 0) ApplyAutoBudget();
  }
}

}  // namespace kvserve
