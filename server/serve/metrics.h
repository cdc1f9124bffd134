// The server's Prometheus metrics, named in vLLM's and TGI's vocabulary with a kvserve_
// prefix. Families are built once at start-up; requests and engine steps observe them.
// Instant state (queue lengths, KV pages, memory) is read at scrape time by
// EngineStateCollector (metrics_state_collector.h).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/scheduler/engine.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace kvserve {

// What one finished prompt reports.
struct RequestOutcome {
  std::string finish_reason;      // length, eos, stop_sequence, stop_token, cancelled, error
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  double queue_seconds = 0;
  double e2e_seconds = 0;
  double ttft_seconds = -1;       // < 0: no token was generated
  double mean_itl_seconds = -1;   // < 0: fewer than two tokens
  double compression_ratio = -1;  // KV entries kept / full cache; < 0 when not reported
  std::string kv_policy;          // the policy that ran (the server default resolved)
  int64_t kv_entries_evicted = 0;
  // The prompt's compressibility estimate (compressibility.h); < 0 when not made.
  double kv_response_trace = -1;
  double kv_effective_rank = -1;
  double kv_spectral_tail = -1;
  double kv_estimated_risk = -1;
};

class ServerMetrics {
 public:
  explicit ServerMetrics(prometheus::Registry& registry);

  void ObserveRequest(const RequestOutcome& o);
  // reason: invalid_argument, queue_full, too_large, draining, loading, unimplemented.
  void ObserveRejected(std::string_view reason);
  // Calls refused for a missing or invalid API key (--api-key-file).
  prometheus::Counter& auth_failures() { return auth_failures_; }
  void ObserveStep(const EngineStepStats& s);

 private:
  prometheus::Histogram& ttft_;
  prometheus::Histogram& itl_;
  prometheus::Histogram& e2e_;
  prometheus::Histogram& queue_;
  prometheus::Histogram& prompt_tokens_hist_;
  prometheus::Histogram& generation_tokens_hist_;
  prometheus::Histogram& compression_ratio_;
  prometheus::Histogram& response_trace_;
  prometheus::Histogram& effective_rank_;
  prometheus::Histogram& spectral_tail_;
  prometheus::Histogram& estimated_risk_;
  prometheus::Counter& prompt_tokens_;
  prometheus::Counter& generation_tokens_;
  prometheus::Family<prometheus::Counter>& finished_;
  prometheus::Family<prometheus::Counter>& rejected_;
  prometheus::Counter& preemptions_;
  prometheus::Counter& auth_failures_;
  prometheus::Family<prometheus::Counter>& evicted_;
  prometheus::Family<prometheus::Histogram>& step_duration_;
  prometheus::Histogram& step_prefill_;
  prometheus::Histogram& step_decode_;
  prometheus::Histogram& step_batch_size_;
  prometheus::Gauge& batch_current_size_;
};

}  // namespace kvserve
