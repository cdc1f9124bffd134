#include "engine/eval/cache_evaluator.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "engine/eval/kl_divergence.h"
#include "engine/kv/sequence_clone.h"

namespace kvserve {
namespace {

int64_t PagesFor(int64_t slots, int64_t page_size) { return (slots + page_size - 1) / page_size; }

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
  const int64_t extra = std::max<int64_t>(static_cast<int64_t>(sample.continuation.size()), options_.answer_tokens);
  if (n < 1 || n > options_.max_context || extra > options_.max_extra) {
    return absl::InvalidArgumentError(absl::StrCat("an evaluation context of ", n, " tokens (+", extra,
                                                   ") is outside what the evaluator was sized for (",
                                                   options_.max_context, " + ", options_.max_extra, ")"));
  }
  prefilled_.Release(*pool_);
  sample_ = sample;
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
  if (sample_.continuation.empty()) return absl::OkStatus();
  absl::StatusOr<SequenceKv> copy = CloneSequence(*pool_, prefilled_);
  if (!copy.ok()) return copy.status();
  ScopedClone clone(*pool_, *std::move(copy));
  return Continue(clone.seq(), nullptr, &full_logits_);
}

absl::Status CacheEvaluator::Continue(SequenceKv& seq, QueryWindow* window, std::vector<float>* logits) {
  logits->clear();
  ForwardRequest req{sample_.continuation, static_cast<int64_t>(sample_.context.size()), &seq, /*all_logits=*/true,
                     window};
  return forward_->Step({&req, 1}, logits);
}

absl::Status CacheEvaluator::PrefillCompressing(SequenceKv& seq, SequenceCompressor& comp,
                                                std::vector<float>* logits) {
  const absl::Span<const int32_t> tokens = sample_.context;
  const int64_t n = static_cast<int64_t>(tokens.size());
  for (int64_t pos = 0; pos < n; pos += options_.prefill_chunk) {
    const int64_t len = std::min(options_.prefill_chunk, n - pos);
    logits->clear();
    ForwardRequest req{tokens.subspan(pos, len), pos, &seq, false, comp.window()};
    if (absl::Status st = forward_->Step({&req, 1}, logits); !st.ok()) return st;
    if (absl::Status st = comp.AfterStep(backend_, *pool_, seq, pos + len == n); !st.ok()) return st;
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
  for (int64_t step = 0; step < options_.answer_tokens; ++step) {
    const int32_t id = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    if (tokenizer_.IsEndOfGeneration(id)) break;
    out.push_back(id);
    last_answer_ = tokenizer_.Decode(out, /*render_special=*/false);
    // Stopping at the first sight of the answer gives the same score as decoding on.
    if (last_answer_.find(sample_.answer) != std::string::npos) return true;
    if (step + 1 == options_.answer_tokens) break;
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

absl::StatusOr<double> CacheEvaluator::Score(const CompressionSettings& settings) {
  if (prefilled_.layer_len.empty() || prefilled_.layer_len[0] == 0) {
    return absl::FailedPreconditionError("Score needs a prefilled sample");
  }
  if (settings.window != options_.window) {
    return absl::InvalidArgumentError(absl::StrCat("settings window ", settings.window,
                                                   " differs from the recorded window ", options_.window));
  }
  std::unique_ptr<SequenceCompressor> comp;
  if (settings.active()) {
    const int64_t extra = std::max<int64_t>(static_cast<int64_t>(sample_.continuation.size()), options_.answer_tokens);
    auto made = SequenceCompressor::Create(model_, settings, static_cast<int64_t>(sample_.context.size()), extra,
                                           options_.page_size, options_.prefill_chunk);
    if (!made.ok()) return made.status();
    comp = *std::move(made);
  }
  const bool chunked = comp && settings.at == CompressAt::kChunk;
  std::vector<float> chunk_logits;
  ScopedClone clone(*pool_, SequenceKv(model_.config.n_layers));
  if (chunked) {
    if (absl::Status st = PrefillCompressing(clone.seq(), *comp, &chunk_logits); !st.ok()) return st;
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
  if (sample_.continuation.empty()) {
    absl::StatusOr<bool> right = Answer(clone.seq(), comp.get(), chunked ? chunk_logits : last_logits_);
    if (!right.ok()) return right.status();
    return *right ? 1.0 : 0.0;
  }
  std::vector<float>& logits = scratch_;
  if (absl::Status st = Continue(clone.seq(), comp ? comp->window() : nullptr, &logits); !st.ok()) return st;
  return MeanKlDivergence(full_logits_, logits, model_.config.vocab_size);
}

}  // namespace kvserve
