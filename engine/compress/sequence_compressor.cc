#include "engine/compress/sequence_compressor.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kvserve {

absl::StatusOr<std::unique_ptr<SequenceCompressor>> SequenceCompressor::Create(
    const Model& model, const CompressionSettings& settings, int64_t prompt_len, int64_t max_new_tokens,
    int64_t page_size, int64_t prefill_chunk) {
  const int64_t n_layers = model.config.n_layers;
  if (absl::Status st = ValidateCompressionSettings(settings, n_layers); !st.ok()) return st;
  auto policy = MakeKvPolicy(settings);
  if (!policy.ok()) return policy.status();
  if (settings.question_tokens && *settings.question_tokens > prompt_len) {
    return absl::InvalidArgumentError(absl::StrCat("question_tokens ", *settings.question_tokens,
                                                   " is longer than the prompt's ", prompt_len, " tokens"));
  }
  std::unique_ptr<SequenceCompressor> comp(
      new SequenceCompressor(model, settings, *std::move(policy), QuotasFor(BudgetOf(settings), n_layers, prompt_len, page_size),
                             prompt_len, max_new_tokens, page_size, prefill_chunk));
  comp->SetUpMergeReduce();
  return comp;
}

SequenceCompressor::SequenceCompressor(const Model& model, const CompressionSettings& s,
                                       std::unique_ptr<KvPolicy> policy, std::vector<int64_t> quotas,
                                       int64_t prompt_len, int64_t max_new, int64_t page_size, int64_t prefill_chunk)
    : model_(model), settings_(s), policy_(std::move(policy)), quotas_(std::move(quotas)), prompt_len_(prompt_len),
      max_new_(max_new), page_size_(page_size), prefill_chunk_(prefill_chunk),
      probes_question_(s.at == CompressAt::kChunk && ProbesWithQuestion(s.chunk_scoring) &&
                       policy_->ScoresWithQueries()),
      question_len_(std::max<int64_t>(1, std::min(prompt_len, probes_question_ ? s.question_tokens.value_or(s.window)
                                                                                 : s.window))),
      headroom_(std::max(prefill_chunk, s.chunk_headroom)),
      window_(model.config.n_layers, probes_question_ ? question_len_ : s.window, model.config.n_heads,
              model.config.head_dim) {}

bool SequenceCompressor::ChunkDue(int64_t len, int64_t quota) const {
  // Another full chunk would take the layer past quota + headroom: compress now, while the
  // chunk just prefilled is what a probe sees last.
  return len + prefill_chunk_ > quota + headroom_;
}

int64_t SequenceCompressor::MidPromptKeep(int64_t quota) const {
  // Half the room above the quota stays filled: the chunks after a compression are encoded
  // over quota + (headroom - chunk) / 2 entries, not over the quota alone, and the layer is
  // compressed again about every headroom / 2 tokens. At 8K tokens, compressing down to the
  // quota lost mid-depth needles the full cache reads (docs/QUALITY.md); the peak is the same.
  return quota + (headroom_ - prefill_chunk_) / 2;
}

SequenceCompressor::~SequenceCompressor() = default;

void SequenceCompressor::TrackKeptPositions() {
  if (kept_positions_) return;
  kept_positions_ = std::make_unique<KeptPositions>(model_.config.n_layers);
}

int64_t SequenceCompressor::DecodePeakPages() const {
  if (merge_reduce_) return MergeReducePeakPages(/*decode_only=*/true);
  int64_t pages = 0;
  for (int64_t q : quotas_) {
    // Decode re-selects a layer back to q once it reaches q + page_size, so it never holds
    // more than that (and never more than the uncompressed prompt plus every new token).
    const int64_t start = std::min(prompt_len_, q);
    pages += PagesFor(std::min(start + max_new_, q + page_size_));
  }
  return pages;
}

int64_t SequenceCompressor::PeakPages() const {
  if (merge_reduce_) return MergeReducePeakPages(/*decode_only=*/false);
  int64_t pages = 0;
  // A chunk step adds at most prefill_chunk entries, probe included, unless the probe alone
  // fills it (then one prompt token and the probe). A layer enters a step with at most
  // quota + headroom - prefill_chunk entries (ChunkDue).
  const int64_t step = probes_question_ ? std::max(prefill_chunk_, 1 + question_len_) : prefill_chunk_;
  for (int64_t q : quotas_) {
    const int64_t prefill =
        settings_.at == CompressAt::kChunk ? std::min(prompt_len_, q + headroom_ - prefill_chunk_ + step) : prompt_len_;
    const int64_t decode = std::min(std::min(prompt_len_, q) + max_new_, q + page_size_);
    pages += PagesFor(std::max(prefill, decode));
  }
  return pages;
}

SequenceCompressor::PrefillStep SequenceCompressor::PlainPrefill(absl::Span<const int32_t> prompt, int64_t cached,
                                                                 int64_t max_tokens) {
  const int64_t n = std::min(static_cast<int64_t>(prompt.size()) - cached, std::max<int64_t>(1, max_tokens));
  return {prompt.subspan(cached, n), n};
}

SequenceCompressor::PrefillStep SequenceCompressor::NextPrefillOf(SequenceCompressor* comp,
                                                                  absl::Span<const int32_t> prompt, int64_t cached,
                                                                  int64_t max_tokens, const SequenceKv& seq) {
  return comp ? comp->NextPrefill(prompt, cached, max_tokens, seq) : PlainPrefill(prompt, cached, max_tokens);
}

SequenceCompressor::PrefillStep SequenceCompressor::NextPrefill(absl::Span<const int32_t> prompt, int64_t cached,
                                                                int64_t max_tokens, const SequenceKv& seq) {
  const int64_t p = static_cast<int64_t>(prompt.size()), remaining = p - cached;
  pending_probe_ = 0;
  const PrefillStep plain = PlainPrefill(prompt, cached, max_tokens);
  if (!probes_question_ || remaining <= max_tokens) return plain;
  // No probe where the chunk leaves every layer within its headroom: nothing will be scored.
  bool due = false;
  for (size_t l = 0; l < quotas_.size(); ++l) due = due || ChunkDue(seq.layer_len[l] + plain.prompt_tokens, quotas_[l]);
  if (!due) return plain;
  const int64_t n = std::max<int64_t>(1, max_tokens - question_len_);
  // The question's tokens; where the chunk already reaches into the question, the rest of it.
  const int64_t probe_from = std::max(cached + n, p - question_len_);
  step_tokens_.assign(prompt.begin() + cached, prompt.begin() + cached + n);
  step_tokens_.insert(step_tokens_.end(), prompt.begin() + probe_from, prompt.end());
  pending_probe_ = p - probe_from;
  // Right after the chunk, or at the question's own positions (question_at_end).
  const int64_t probe_pos = settings_.chunk_scoring == ChunkScoring::kQuestionAtEnd ? probe_from : cached + n;
  return {step_tokens_, n, pending_probe_, probe_pos};
}

absl::Status SequenceCompressor::CompressLayer(Backend& backend, PagePool& pool, SequenceKv& seq, int64_t l,
                                               int64_t probe, bool mid_prompt) {
  const ModelConfig& c = model_.config;
  if (!layers_) {
    // Every policy but merge-reduce (which takes MergeReduceStep instead) only scores.
    const auto* scoring = dynamic_cast<const ScoringPolicy*>(policy_.get());
    if (!scoring) return absl::InternalError(absl::StrCat("KV policy ", settings_.policy, " does not score"));
    layers_ = std::make_unique<LayerCompressor>(backend, *scoring, c.n_layers, EvictedWeightOf(settings_));
    layers_->TrackPositions(kept_positions_.get());
  }
  const int64_t len = seq.layer_len[l] - probe;
  window_.CopyOrdered(l, &window_rows_);
  SelectionRequest r;
  r.layer = LayerKv{pool.view(), seq.layer_pages[l], len + probe};
  r.probe_slots = probe;
  r.window = window_rows_;
  r.window_len = window_.size(l);
  r.n_heads = c.n_heads;
  r.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  r.wo = model_.weights.layers[l].wo;
  r.n_keep = std::min(mid_prompt ? MidPromptKeep(quotas_[l]) : quotas_[l], len);
  r.mid_prompt = mid_prompt;
  r.keep_first = SinkTokens(settings_);
  return layers_->Compress(r, pool, seq, l, &stats_);
}

absl::Status SequenceCompressor::AfterStep(Backend& backend, PagePool& pool, SequenceKv& seq, bool prompt_done) {
  // Checked once per request up front (CheckDeviceForm); this guards direct callers.
  if (!pool.host_memory() && (policy_->ReadsHostPages() || settings_.auto_risk > 0)) {
    return absl::UnimplementedError(absl::StrCat("KV policy ", settings_.policy,
                                                 " reads the pages on the host; its pool must be in host memory"));
  }
  const int64_t probe = std::exchange(pending_probe_, 0);
  // The compressibility estimate reads pages on the host; a device pool goes without it.
  if (pool.host_memory()) ObservePrompt(backend, pool, seq, prompt_done, probe);
  if (merge_reduce_) return MergeReduceStep(backend, pool, seq, prompt_done);
  const int64_t n_layers = static_cast<int64_t>(quotas_.size());
  const bool prompt_end = prompt_done && !prompt_compressed_;
  for (int64_t l = 0; l < n_layers; ++l) {
    const int64_t len = seq.layer_len[l] - probe, q = quotas_[l];
    bool due;
    if (prompt_end) {
      due = len > q;
    } else if (!prompt_done && settings_.at == CompressAt::kChunk) {
      // A probe ran for this step: every layer past what a mid-prompt compression keeps uses it.
      due = len > MidPromptKeep(q) && (probe > 0 || ChunkDue(len, q));
    } else if (prompt_done) {
      due = len >= q + page_size_;
    } else {
      due = false;
    }
    if (due) {
      const bool mid_prompt = !prompt_done && settings_.at == CompressAt::kChunk;
      if (absl::Status st = CompressLayer(backend, pool, seq, l, probe, mid_prompt); !st.ok()) return st;
    } else if (probe > 0) {
      seq.TruncateLayer(pool, l, len);
    }
  }
  if (prompt_end) {
    prompt_compressed_ = true;
    seq.ShrinkReservation(pool, DecodePeakPages());
  }
  estimated_len_ = seq.layer_len;
  return absl::OkStatus();
}

}  // namespace kvserve
