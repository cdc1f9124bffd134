// `kvserve eval`: every (task, context, sample) prefilled once, then scored under every
// (policy, budget), averaged into one table of method x budget x task@context.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/compress/compression_settings.h"
#include "engine/offline/eval_table.h"
#include "engine/offline/eval_task.h"
#include "engine/offline/prompt_frame.h"
#include "engine/offline/text_corpus.h"
#include "engine/model/model_weights.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/backend.h"

namespace kvserve {

struct EvalPlan {
  std::vector<std::string> policies;  // "full" is the uncompressed baseline: one row
  std::vector<double> budgets;        // fractions of the context, in (0, 1]
  std::vector<double> auto_risks;     // auto:RISK budgets, a row each per policy (prefill_end only)
  std::vector<int64_t> contexts;      // tokens
  std::vector<EvalTask> tasks;
  int64_t samples = 3;
  // Runs samples [first_sample, end_sample) only (end_sample 0: to `samples`): the same samples
  // a whole run draws (a sample's needle depth and text depend on its index and `samples`), to
  // split a long run across processes or study a slice.
  int64_t first_sample = 0;
  int64_t end_sample = 0;
  int64_t sample_end() const { return end_sample > 0 ? end_sample : samples; }
  int64_t continuation = 64;          // kl: tokens teacher-forced after the context
  int64_t answer_tokens = 12;         // passkey/multikey: greedy tokens for the answer
  uint64_t seed = 0;
  PromptStyle style = PromptStyle::kPlain;
  CompressionSettings base;           // window, first-stage ratio, pool kernel, sinks
  int64_t page_size = 16;
  int64_t prefill_chunk = 512;
  bool verbose = false;               // a progress line per configuration, with its answer
  // false (--no-full-reference): no full-cache prefill per sample, so no answer NLL gaps;
  // only chunk-mode rows of retrieval tasks (CacheEvaluatorOptions::full_reference).
  bool full_reference = true;
};

// The rows the plan asks for: full once (if asked), then each other policy x budget, then
// each other policy x auto risk.
std::vector<EvalRow> EvalRows(const EvalPlan& plan);

// Runs the plan; corpus may be null when it has no kl task. Every sample is built (and
// checked) before the first prefill, so a context too short for its task fails at once.
// progress receives one line per prefilled context (and one at least every 30 s);
// checkpoint, the table so far after each context (so a long run stopped midway keeps what it
// measured).
absl::StatusOr<EvalTable> RunEvalPlan(const Model& model, const Tokenizer& tokenizer, Backend& backend,
                                  const EvalPlan& plan, const TextCorpus* corpus,
                                  const std::function<void(const std::string&)>& progress = {},
                                  const std::function<void(const EvalTable&)>& checkpoint = {});

}  // namespace kvserve
