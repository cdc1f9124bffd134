// What every gRPC handler of `kvserve serve` needs: the model, the engine, the limits, the
// metrics and the drain tracker. Built once the model has loaded; immutable after.
#pragma once
#include <cstdint>

#include "engine/compress/compression_settings.h"
#include "engine/model/model_weights.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/scheduler/engine.h"
#include "server/serve/metrics.h"
#include "server/serve/serve_options.h"
#include "server/serve/serve_tracker.h"

namespace kvserve {

struct ServeContext {
  const ServeOptions& options;
  const Model& model;
  const Tokenizer& tokenizer;
  Engine& engine;
  ServerMetrics& metrics;
  RequestTracker& tracker;
  int64_t max_context = 0;           // --max-context resolved against the model
  int64_t max_new_tokens_limit = 0;  // --max-new-tokens-limit resolved
  int64_t kv_pages_total = 0;
  CompressionSettings kv_defaults;   // what empty kv.* request fields mean (--kv-* flags)
};

}  // namespace kvserve
