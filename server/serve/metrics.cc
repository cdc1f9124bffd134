// Metric families and bucket bounds. Latency buckets span a GPU's milliseconds to a CPU's
// minutes for a 128K-token prompt; token buckets reach 256K.
#include "server/serve/metrics.h"

#include "server/serve/grpc_request.h"

#include <string>
#include <vector>

namespace kvserve {
namespace {

using prometheus::Histogram;

// 1 ms .. ~45 min, about 2.5x apart.
const Histogram::BucketBoundaries kLatencyBuckets = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,   2.5,
    5,     10,     20,    40,   80,    160,  320, 640,  1280, 2560};
// Gaps between tokens: 0.1 ms (small model, GPU) .. 10 s (huge batch on a CPU).
const Histogram::BucketBoundaries kItlBuckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                 0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
// Powers of two up to 256K tokens.
Histogram::BucketBoundaries TokenBuckets() {
  Histogram::BucketBoundaries b;
  for (double v = 1; v <= 262144; v *= 2) b.push_back(v);
  return b;
}
const Histogram::BucketBoundaries kRatioBuckets = {0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3,
                                                   0.4,  0.5,  0.6,  0.7, 0.8,  0.9, 1.0};
// Shares in [0, 2] (one random representative leaves about twice the variance).
const Histogram::BucketBoundaries kRiskBuckets = {0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4,
                                                  0.5,  0.6,  0.8,  1.0, 1.5,  2.0};
// logit^2, 0.001 .. ~1000, about 2x apart: the trace of the response covariance.
Histogram::BucketBoundaries LogitSquaredBuckets() {
  Histogram::BucketBoundaries b;
  for (double v = 0.001; v <= 1100; v *= 2) b.push_back(v);
  return b;
}
// Directions, 1 .. 128 (head_dim at most).
const Histogram::BucketBoundaries kRankBuckets = {1, 1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128};
const Histogram::BucketBoundaries kBatchBuckets = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};

const char* const kFinishReasons[] = {"length", "eos", "stop_sequence", "stop_token", "cancelled", "error"};
const char* const kRejectReasons[] = {"invalid_argument", "queue_full", "too_large", "draining", "loading",
                                      "unimplemented"};

template <typename T>
T& One(prometheus::Family<T>& family, auto&&... args) {
  return family.Add({}, std::forward<decltype(args)>(args)...);
}

prometheus::Family<Histogram>& HistFamily(prometheus::Registry& r, const std::string& name, const std::string& help) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(r);
}

}  // namespace

ServerMetrics::ServerMetrics(prometheus::Registry& r)
    : ttft_(One(HistFamily(r, "kvserve_time_to_first_token_seconds",
                           "Seconds from arrival to the first generated token (queue + prefill)."),
                kLatencyBuckets)),
      itl_(One(HistFamily(r, "kvserve_inter_token_latency_seconds",
                          "Mean seconds between consecutive generated tokens, one observation per request."),
               kItlBuckets)),
      e2e_(One(HistFamily(r, "kvserve_e2e_request_latency_seconds", "Seconds from arrival to the end of the request."),
               kLatencyBuckets)),
      queue_(One(HistFamily(r, "kvserve_request_queue_time_seconds",
                            "Seconds from arrival until the request reached the engine's queue."),
                 kLatencyBuckets)),
      prompt_tokens_hist_(One(HistFamily(r, "kvserve_request_prompt_tokens", "Prompt tokens per request."),
                              TokenBuckets())),
      generation_tokens_hist_(One(HistFamily(r, "kvserve_request_generation_tokens", "Generated tokens per request."),
                                  TokenBuckets())),
      compression_ratio_(One(HistFamily(r, "kvserve_request_kv_compression_ratio",
                                        "KV entries a request kept over what a full cache holds (1 = no compression)."),
                             kRatioBuckets)),
      response_trace_(One(HistFamily(r, "kvserve_request_kv_response_trace",
                                     "Per request: variance of a window query's logit across the prompt's KV entries "
                                     "(logit^2, mean over layers); the spread compression has to summarize."),
                          LogitSquaredBuckets())),
      effective_rank_(One(HistFamily(r, "kvserve_request_kv_effective_rank",
                                     "Per request: effective rank of the KV entries' response covariance (mean over "
                                     "layers); in how many directions the responses spread."),
                          kRankBuckets)),
      spectral_tail_(One(HistFamily(r, "kvserve_request_kv_spectral_tail",
                                    "Per request: share of the response variance outside the top 8 directions."),
                         kRatioBuckets)),
      estimated_risk_(One(HistFamily(r, "kvserve_request_kv_estimated_risk",
                                     "Per request: share of the prompt's value variance the kept budget leaves "
                                     "unexplained (0 = nothing lost)."),
                          kRiskBuckets)),
      prompt_tokens_(One(prometheus::BuildCounter()
                             .Name("kvserve_prompt_tokens_total")
                             .Help("Prompt tokens of finished requests.")
                             .Register(r))),
      generation_tokens_(One(prometheus::BuildCounter()
                                 .Name("kvserve_generation_tokens_total")
                                 .Help("Generated tokens of finished requests.")
                                 .Register(r))),
      finished_(prometheus::BuildCounter()
                    .Name("kvserve_request_success_total")
                    .Help("Finished requests (prompts) by finish_reason.")
                    .Register(r)),
      rejected_(prometheus::BuildCounter()
                    .Name("kvserve_request_rejected_total")
                    .Help("Calls refused before reaching the engine, by reason.")
                    .Register(r)),
      preemptions_(One(prometheus::BuildCounter()
                           .Name("kvserve_num_preemptions_total")
                           .Help("Requests preempted for lack of KV pages (admission reserves peak pages, so 0 today).")
                           .Register(r))),
      auth_failures_(One(prometheus::BuildCounter()
                             .Name("kvserve_auth_failures_total")
                             .Help("gRPC calls refused for a missing or invalid API key (--api-key-file).")
                             .Register(r))),
      evicted_(prometheus::BuildCounter()
                   .Name("kvserve_kv_entries_evicted_total")
                   .Help("KV slots (summed over layers) dropped by compression, by policy.")
                   .Register(r)),
      step_duration_(HistFamily(r, "kvserve_step_duration_seconds",
                                "Seconds per engine step, by phase (a step with any prefill chunk is prefill).")),
      step_prefill_(step_duration_.Add({{"phase", "prefill"}}, kLatencyBuckets)),
      step_decode_(step_duration_.Add({{"phase", "decode"}}, kLatencyBuckets)),
      step_batch_size_(One(HistFamily(r, "kvserve_step_batch_size", "Sequences per engine step."), kBatchBuckets)),
      batch_current_size_(One(prometheus::BuildGauge()
                                  .Name("kvserve_batch_current_size")
                                  .Help("Sequences in the last engine step.")
                                  .Register(r))) {
  // Every label value exists from the start, so dashboards and rate() see zeros, not gaps.
  for (const char* f : kFinishReasons) finished_.Add({{"finish_reason", f}});
  for (const char* f : kRejectReasons) rejected_.Add({{"reason", f}});
  for (const std::string& p : KvPolicyNames()) evicted_.Add({{"policy", p}});
}

void ServerMetrics::ObserveRequest(const RequestOutcome& o) {
  finished_.Add({{"finish_reason", o.finish_reason}}).Increment();
  prompt_tokens_.Increment(static_cast<double>(o.prompt_tokens));
  generation_tokens_.Increment(static_cast<double>(o.generated_tokens));
  prompt_tokens_hist_.Observe(static_cast<double>(o.prompt_tokens));
  generation_tokens_hist_.Observe(static_cast<double>(o.generated_tokens));
  queue_.Observe(o.queue_seconds);
  e2e_.Observe(o.e2e_seconds);
  if (o.ttft_seconds >= 0) ttft_.Observe(o.ttft_seconds);
  if (o.mean_itl_seconds >= 0) itl_.Observe(o.mean_itl_seconds);
  if (o.compression_ratio >= 0) compression_ratio_.Observe(o.compression_ratio);
  if (o.kv_response_trace >= 0) response_trace_.Observe(o.kv_response_trace);
  if (o.kv_effective_rank >= 0) effective_rank_.Observe(o.kv_effective_rank);
  if (o.kv_spectral_tail >= 0) spectral_tail_.Observe(o.kv_spectral_tail);
  if (o.kv_estimated_risk >= 0) estimated_risk_.Observe(o.kv_estimated_risk);
  if (o.kv_entries_evicted > 0) {
    evicted_.Add({{"policy", o.kv_policy}})
        .Increment(static_cast<double>(o.kv_entries_evicted));
  }
}

void ServerMetrics::ObserveRejected(std::string_view reason) {
  rejected_.Add({{"reason", std::string(reason)}}).Increment();
}

void ServerMetrics::ObserveStep(const EngineStepStats& s) {
  (s.prefill ? step_prefill_ : step_decode_).Observe(s.seconds);
  step_batch_size_.Observe(static_cast<double>(s.sequences));
  batch_current_size_.Set(static_cast<double>(s.sequences));
}

}  // namespace kvserve
