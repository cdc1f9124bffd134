// One evaluation context prefilled once with the full cache, then scored under any number
// of KV cache settings, each on its own copy of that cache (compressed at the end of the
// prompt, as in the papers) so that prefill, the expensive part, is paid once per context.
// Settings with compress_at chunk are the exception: later chunks attend to the cache the
// earlier ones left, so such a configuration prefills the context again, compressing as it
// goes, exactly as a served request would.
#pragma once
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/compress/compression_settings.h"
#include "engine/compress/sequence_compressor.h"
#include "engine/offline/eval_sample.h"
#include "engine/kv/page_pool.h"
#include "engine/kv/query_window.h"
#include "engine/model/forward.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/backend.h"

namespace kvserve {

struct CacheEvaluatorOptions {
  int64_t max_context = 0;    // longest context it will see
  int64_t max_extra = 64;     // most tokens run after a context (continuation or answer)
  int64_t window = CompressionSettings{}.window;  // window queries recorded in prefill; settings must match
  int64_t page_size = 16;
  int64_t prefill_chunk = 512;
  int64_t answer_tokens = 12; // greedy tokens a retrieval answer may take
  // false: Prefill only loads the sample, and Score takes chunk-mode retrieval settings alone
  // (they prefill again anyway), with no answer NLL gap (NaN). Half an 8K chunk-mode row's
  // time is the full cache's prefill, which two such rows compare without.
  bool full_reference = true;
};

// Greedy tokens a retrieval answer may take: the configured count, or, for an answer of
// several parts (a multi-value needle's numbers, a chain's variables), twice the expected
// answer's length + 4 when that is longer: a model may restate each part with its context
// ("VAR B = VAR A, VAR C = VAR B") and is right when every part appears.
int64_t AnswerBudget(int64_t configured, const EvalSample& sample);

// One sample under one setting.
struct EvalScore {
  double value = 0;            // mean KL (kl) or 1/0 for a right/wrong greedy answer (retrieval)
  // Retrieval: -log p(answer tokens | context) under these settings minus the same with the
  // full cache (nats; > 0: the compressed cache makes the right answer less likely). NaN for kl.
  double answer_nll_gap = 0;
  // Retrieval: -log p(answer tokens | context) under these settings (nats). NaN for kl.
  double answer_nll = std::numeric_limits<double>::quiet_NaN();
  int64_t peak_kv_bytes = 0;   // most KV bytes the context's prefill held, with its compression
  // Retrieval: of every (layer, KV head) pair, the share that still holds every token of the
  // answer's needle once the prompt is in (1 for the full cache). NaN for kl, merge-reduce, or
  // where the answer's tokens cannot be located.
  double answer_kept = std::numeric_limits<double>::quiet_NaN();
  // The same for every token of the sample's cues (a multikey needle's key): telling a needle
  // kept but no longer tied to its key from one dropped. NaN where answer_kept is, or no cues.
  double cue_kept = std::numeric_limits<double>::quiet_NaN();
  // The same for each of the sample's decoys (the other needles' numbers), averaged over
  // them: a cache that keeps the other keys' numbers as widely as the asked one's did not
  // tell them apart. NaN where answer_kept is, or no decoys.
  double decoy_kept = std::numeric_limits<double>::quiet_NaN();
};

class CacheEvaluator {
 public:
  CacheEvaluator(const Model& model, const Tokenizer& tokenizer, Backend& backend, const CacheEvaluatorOptions& o);
  ~CacheEvaluator();

  // Prefills sample.context with the full cache (replacing the previous sample), recording
  // the query window; for a kl sample also the full cache's continuation logits. Without
  // options.full_reference it only takes the sample (no prefill).
  absl::Status Prefill(const EvalSample& sample);

  // The sample under `settings` (policy "full": the uncompressed cache). A sample with a
  // continuation scores the mean KL(full || these settings) over its positions; one with an
  // answer scores 1 when the greedy answer contains it, else 0.
  absl::StatusOr<EvalScore> Score(const CompressionSettings& settings);

  double prefill_seconds() const { return prefill_seconds_; }  // 0 without full_reference
  // Tokens per layer the last Score's cache kept to, mean over layers (the context's length
  // for the full cache; what auto:RISK picked for an auto budget).
  double last_mean_quota() const { return last_mean_quota_; }
  // The text of the last greedy answer Score produced.
  const std::string& last_answer() const { return last_answer_; }
  const PagePool& pool() const { return *pool_; }

 private:
  // Runs the continuation after the context on seq; logits [continuation, vocab].
  absl::Status Continue(SequenceKv& seq, QueryWindow* window, std::vector<float>* logits);
  // Greedy-decodes on seq (compressing with comp, if any, as generation would), starting
  // from the logits after the context.
  absl::StatusOr<bool> Answer(SequenceKv& seq, SequenceCompressor* comp, const std::vector<float>& first_logits);
  // Prefills the context on seq (empty), calling comp after every chunk; logits: the last
  // token's; *peak_pages: the most pages seq held.
  absl::Status PrefillCompressing(SequenceKv& seq, SequenceCompressor& comp, std::vector<float>* logits,
                                  int64_t* peak_pages);
  // -log p(sample.answer_tokens) after the context in seq, whose last logits are
  // first_logits; seq (and window) are left as they were.
  absl::StatusOr<double> AnswerNll(SequenceKv& seq, QueryWindow* window, const std::vector<float>& first_logits);

  const Model& model_;
  const Tokenizer& tokenizer_;
  Backend& backend_;
  CacheEvaluatorOptions options_;
  std::unique_ptr<PagePool> pool_;
  std::unique_ptr<LlamaForward> forward_;
  EvalSample sample_;
  bool sample_loaded_ = false;
  SequenceKv prefilled_;
  QueryWindow window_;
  std::vector<float> last_logits_;  // [vocab] after the context, with the full cache
  std::vector<float> full_logits_;  // kl: [continuation, vocab] with the full cache
  double full_answer_nll_ = 0;      // retrieval: AnswerNll with the full cache
  std::vector<std::pair<int64_t, int64_t>> answer_spans_;  // retrieval: the answers' tokens (answer_span.h)
  std::vector<std::pair<int64_t, int64_t>> cue_spans_;     // retrieval: the cues' tokens
  std::vector<std::pair<int64_t, int64_t>> decoy_spans_;   // retrieval: each decoy's tokens
  std::vector<float> scratch_;
  double prefill_seconds_ = 0;
  std::string last_answer_;
  double last_mean_quota_ = 0;
};

}  // namespace kvserve
