// One eval context prefilled once, then scored under each KV setting on its own copy of the cache.
#include "engine/offline/cache_evaluator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "engine/offline/answer_span.h"
#include "engine/offline/kl_divergence.h"
#include "engine/kv/sequence_clone.h"

namespace kvserve {
namespace {

int64_t PagesFor(int64_t slots, int64_t page_size) { return (slots + page_size - 1) / page_size; }

bool ContainsAll(const std::string& text, const std::vector<std::string>& parts) {
  for (const std::string& p : parts) {
    if (text.find(p) == std::string::npos) return false;
  }
  return true;
}

// Releases a clone's pages however the scoring ends, so the pool never grows.
class ScopedClone {
 public:
  ScopedClone(PagePool& pool, SequenceKv seq) : pool_(pool), seq_(std::move(seq)) {}
  ~ScopedClone() { seq_.Release(pool_); }
  SequenceKv& seq() { return seq_; }

 private:
  PagePool& pool_;
  SequenceKv seq_;
};

}  // namespace

int64_t AnswerBudget(int64_t configured, const EvalSample& sample) {
  if (sample.answers.size() < 2) return configured;
  return std::max<int64_t>(configured, 2 * static_cast<int64_t>(sample.answer_tokens.size()) + 4);
}

CacheEvaluator::CacheEvaluator(const Model& model, const Tokenizer& tokenizer, Backend& backend,
                               const CacheEvaluatorOptions& o)
    : model_(model), tokenizer_(tokenizer), backend_(backend), options_(o), prefilled_(model.config.n_layers),
      window_(model.config.n_layers, o.window, model.config.n_heads, model.config.head_dim) {
  const ModelConfig& c = model.config;
  // The prefilled sequence and one copy of it, each grown by the tokens run after the context
  // (a compressed copy never holds more than the full one).
  const int64_t per_seq = c.n_layers * PagesFor(o.max_context + o.max_extra, o.page_size);
  pool_ = std::make_unique<PagePool>(PagePoolShape{2 * per_seq, o.page_size, c.n_kv_heads, c.head_dim});
  forward_ = std::make_unique<LlamaForward>(model, backend, *pool_);
}

CacheEvaluator::~CacheEvaluator() { prefilled_.Release(*pool_); }

absl::Status CacheEvaluator::Prefill(const EvalSample& sample) {
  using Clock = std::chrono::steady_clock;
  const ModelConfig& c = model_.config;
  const int64_t n = static_cast<int64_t>(sample.context.size());
  const int64_t extra = std::max<int64_t>(static_cast<int64_t>(sample.continuation.size()),
                                          AnswerBudget(options_.answer_tokens, sample));
  if (n < 1 || n > options_.max_context || extra > options_.max_extra) {
    return absl::InvalidArgumentError(absl::StrCat("an evaluation context of ", n, " tokens (+", extra,
                                                   ") is outside what the evaluator was sized for (",
                                                   options_.max_context, " + ", options_.max_extra, ")"));
  }
  prefilled_.Release(*pool_);
  sample_ = sample;
  sample_loaded_ = true;
  // Retrieval only; an empty list skips AnswerSpans, which decodes the whole context.
  const auto spans_of = [&](const std::vector<std::string>& texts) {
    return sample_.continuation.empty() && !texts.empty() ? AnswerSpans(tokenizer_, sample_.context, texts)
                                                          : std::vector<std::pair<int64_t, int64_t>>{};
  };
  answer_spans_ = spans_of(sample_.answers);
  cue_spans_ = spans_of(sample_.cues);
  decoy_spans_ = spans_of(sample_.decoys);
  prefill_seconds_ = 0;
  if (!options_.full_reference) return absl::OkStatus();
  window_ = QueryWindow(c.n_layers, options_.window, c.n_heads, c.head_dim);
  const auto t0 = Clock::now();
  const absl::Span<const int32_t> tokens = sample_.context;
  for (int64_t pos = 0; pos < n; pos += options_.prefill_chunk) {
    last_logits_.clear();
    ForwardRequest req{tokens.subspan(pos, std::min(options_.prefill_chunk, n - pos)), pos, &prefilled_, false,
                       &window_};
    if (absl::Status st = forward_->Step({&req, 1}, &last_logits_); !st.ok()) return st;
  }
  prefill_seconds_ = std::chrono::duration<double>(Clock::now() - t0).count();
  full_logits_.clear();
  absl::StatusOr<SequenceKv> copy = CloneSequence(*pool_, prefilled_);
  if (!copy.ok()) return copy.status();
  ScopedClone clone(*pool_, *std::move(copy));
  if (sample_.continuation.empty()) {
    absl::StatusOr<double> nll = AnswerNll(clone.seq(), nullptr, last_logits_);
    if (!nll.ok()) return nll.status();
    full_answer_nll_ = *nll;
    return absl::OkStatus();
  }
  return Continue(clone.seq(), nullptr, &full_logits_);
}

absl::StatusOr<double> CacheEvaluator::AnswerNll(SequenceKv& seq, QueryWindow* window,
                                                 const std::vector<float>& first_logits) {
  const std::vector<int32_t>& answer = sample_.answer_tokens;
  if (answer.empty()) return 0.0;
  const int64_t vocab = model_.config.vocab_size;
  auto neg_log_prob = [](absl::Span<const float> row, int32_t token) {
    double mx = row[0];
    for (float x : row) mx = std::max(mx, static_cast<double>(x));
    double sum = 0;
    for (float x : row) sum += std::exp(static_cast<double>(x) - mx);
    return mx + std::log(sum) - static_cast<double>(row[token]);
  };
  double nll = neg_log_prob(first_logits, answer[0]);
  if (answer.size() == 1) return nll;
  // Teacher-force all but the last token, then put the sequence (and the window the answer
  // decode will score with) back as they were.
  const std::vector<int64_t> lens = seq.layer_len;
  std::optional<QueryWindow> saved;
  if (window) saved = *window;
  std::vector<float> logits;
  ForwardRequest req{absl::MakeConstSpan(answer).first(answer.size() - 1),
                     static_cast<int64_t>(sample_.context.size()), &seq, /*all_logits=*/true, window};
  const absl::Status st = forward_->Step({&req, 1}, &logits);
  for (size_t l = 0; l < lens.size(); ++l) seq.TruncateLayer(*pool_, static_cast<int64_t>(l), lens[l]);
  if (window) *window = *saved;
  if (!st.ok()) return st;
  for (size_t i = 1; i < answer.size(); ++i) {
    nll += neg_log_prob(absl::MakeConstSpan(logits).subspan((i - 1) * vocab, vocab), answer[i]);
  }
  return nll;
}

absl::Status CacheEvaluator::Continue(SequenceKv& seq, QueryWindow* window, std::vector<float>* logits) {
  logits->clear();
  ForwardRequest req{sample_.continuation, static_cast<int64_t>(sample_.context.size()), &seq, /*all_logits=*/true,
                     window};
  return forward_->Step({&req, 1}, logits);
}

absl::Status CacheEvaluator::PrefillCompressing(SequenceKv& seq, SequenceCompressor& comp,
                                                std::vector<float>* logits, int64_t* peak_pages) {
  *peak_pages = 0;
  const absl::Span<const int32_t> tokens = sample_.context;
  const int64_t n = static_cast<int64_t>(tokens.size());
  for (int64_t pos = 0; pos < n;) {
    // As a served request: the step may carry a probe of the question after the chunk.
    const SequenceCompressor::PrefillStep step = comp.NextPrefill(tokens, pos, options_.prefill_chunk, seq);
    logits->clear();
    ForwardRequest req{step.tokens, pos, &seq, false, comp.window(), step.probe_tokens, step.probe_start_pos};
    if (absl::Status st = forward_->Step({&req, 1}, logits); !st.ok()) return st;
    *peak_pages = std::max(*peak_pages, seq.pages_held());
    pos += step.prompt_tokens;
    if (absl::Status st = comp.AfterStep(backend_, *pool_, seq, pos == n); !st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> CacheEvaluator::Answer(SequenceKv& seq, SequenceCompressor* comp,
                                            const std::vector<float>& first_logits) {
  std::vector<float>& logits = scratch_;
  logits = first_logits;  // the first token comes from the prefill, as in generation
  std::vector<int32_t> out;
  int64_t pos = static_cast<int64_t>(sample_.context.size());
  last_answer_.clear();
  const int64_t budget = AnswerBudget(options_.answer_tokens, sample_);
  for (int64_t step = 0; step < budget; ++step) {
    const int32_t id = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    if (tokenizer_.IsEndOfGeneration(id)) break;
    out.push_back(id);
    last_answer_ = tokenizer_.Decode(out, /*render_special=*/false);
    // Stopping at the first sight of the answer gives the same score as decoding on.
    if (ContainsAll(last_answer_, sample_.answers)) return true;
    if (step + 1 == budget) break;
    logits.clear();
    ForwardRequest req{absl::MakeConstSpan(&out.back(), 1), pos, &seq, false, comp ? comp->window() : nullptr};
    if (absl::Status st = forward_->Step({&req, 1}, &logits); !st.ok()) return st;
    ++pos;
    if (comp) {
      if (absl::Status st = comp->AfterStep(backend_, *pool_, seq, /*prompt_done=*/true); !st.ok()) return st;
    }
  }
  return false;
}

absl::StatusOr<EvalScore> CacheEvaluator::Score(const CompressionSettings& settings) {
  if (!sample_loaded_) return absl::FailedPreconditionError("Score needs a prefilled sample");
  if (!options_.full_reference && (!settings.active() || settings.at != CompressAt::kChunk ||
                                   !sample_.continuation.empty())) {
    return absl::FailedPreconditionError(
        "without the full cache's prefill only chunk-mode compression of a retrieval sample can be scored");
  }
  if (settings.window != options_.window) {
    return absl::InvalidArgumentError(absl::StrCat("settings window ", settings.window,
                                                   " differs from the recorded window ", options_.window));
  }
  std::unique_ptr<SequenceCompressor> comp;
  if (settings.active()) {
    const int64_t extra = std::max<int64_t>(static_cast<int64_t>(sample_.continuation.size()),
                                            AnswerBudget(options_.answer_tokens, sample_));
    auto made = SequenceCompressor::Create(model_, settings, static_cast<int64_t>(sample_.context.size()), extra,
                                           options_.page_size, options_.prefill_chunk);
    if (!made.ok()) return made.status();
    comp = *std::move(made);
    if (!comp->merge_reduce() && !answer_spans_.empty()) comp->TrackKeptPositions();
  }
  const bool chunked = comp && settings.at == CompressAt::kChunk;
  std::vector<float> chunk_logits;
  ScopedClone clone(*pool_, SequenceKv(model_.config.n_layers));
  EvalScore score;
  int64_t peak_pages = prefilled_.pages_held();
  if (chunked) {
    if (absl::Status st = PrefillCompressing(clone.seq(), *comp, &chunk_logits, &peak_pages); !st.ok()) return st;
  } else {
    absl::StatusOr<SequenceKv> copy = CloneSequence(*pool_, prefilled_);
    if (!copy.ok()) return copy.status();
    clone.seq() = *std::move(copy);
    if (comp) {
      *comp->window() = window_;
      if (absl::Status st = comp->AfterStep(backend_, *pool_, clone.seq(), /*prompt_done=*/true); !st.ok()) return st;
    }
  }
  last_mean_quota_ = comp ? std::min(comp->mean_quota(), static_cast<double>(sample_.context.size()))
                         : static_cast<double>(sample_.context.size());
  score.peak_kv_bytes = peak_pages * PagePool::PageBytes(pool_->shape());
  if (!answer_spans_.empty() && (!comp || comp->kept_positions())) {
    // The share of layer-heads holding every token of the spans; the full cache holds all.
    const auto held = [&](absl::Span<const std::pair<int64_t, int64_t>> spans) {
      return comp ? comp->kept_positions()->ShareHoldingSpans(model_.config.n_kv_heads, spans) : 1.0;
    };
    score.answer_kept = held(answer_spans_);
    if (!cue_spans_.empty()) score.cue_kept = held(cue_spans_);
    if (!decoy_spans_.empty()) {
      double sum = 0;
      for (const auto& span : decoy_spans_) sum += held({&span, 1});
      score.decoy_kept = sum / static_cast<double>(decoy_spans_.size());
    }
  }
  if (sample_.continuation.empty()) {
    const std::vector<float>& first = chunked ? chunk_logits : last_logits_;
    absl::StatusOr<double> nll = AnswerNll(clone.seq(), comp ? comp->window() : nullptr, first);
    if (!nll.ok()) return nll.status();
    score.answer_nll = *nll;
    score.answer_nll_gap =
        options_.full_reference ? *nll - full_answer_nll_ : std::numeric_limits<double>::quiet_NaN();
    absl::StatusOr<bool> right = Answer(clone.seq(), comp.get(), first);
    if (!right.ok()) return right.status();
    score.value = *right ? 1.0 : 0.0;
    return score;
  }
  std::vector<float>& logits = scratch_;
  if (absl::Status st = Continue(clone.seq(), comp ? comp->window() : nullptr, &logits); !st.ok()) return st;
  score.value = MeanKlDivergence(full_logits_, logits, model_.config.vocab_size);
  score.answer_nll_gap = std::numeric_limits<double>::quiet_NaN();
  return score;
}

}  // namespace kvserve
