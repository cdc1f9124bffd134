// PromptRun: timings, output and the end-of-request report of one prompt.
#include "server/serve/grpc_prompt_run.h"

#include <algorithm>

namespace kvserve {
namespace {

double Seconds(PromptRun::Clock::duration d) { return std::chrono::duration<double>(d).count(); }

const char* MetricReason(v1::FinishReason r) {
  switch (r) {
    case v1::FINISH_REASON_LENGTH: return "length";
    case v1::FINISH_REASON_EOS: return "eos";
    case v1::FINISH_REASON_STOP_SEQUENCE: return "stop_sequence";
    case v1::FINISH_REASON_STOP_TOKEN: return "stop_token";
    case v1::FINISH_REASON_CANCELLED: return "cancelled";
    default: return "error";
  }
}

}  // namespace

v1::FinishReason ToProtoFinishReason(FinishReason r) {
  switch (r) {
    case FinishReason::kLength: return v1::FINISH_REASON_LENGTH;
    case FinishReason::kEos: return v1::FINISH_REASON_EOS;
    case FinishReason::kStopSequence: return v1::FINISH_REASON_STOP_SEQUENCE;
    case FinishReason::kStopToken: return v1::FINISH_REASON_STOP_TOKEN;
  }
  return v1::FINISH_REASON_ERROR;
}

namespace {
void FillProtoLogprobs(int32_t token, float logprob, const std::vector<std::pair<int32_t, float>>& top,
                       v1::TokenLogprobs* out) {
  out->set_token_id(token);
  out->set_logprob(logprob);
  for (const auto& [id, lp] : top) {
    v1::TopLogprob* t = out->add_top();
    t->set_token_id(id);
    t->set_logprob(lp);
  }
}
}  // namespace

bool ToProtoLogprobs(const StreamEvent& e, v1::TokenLogprobs* out) {
  if (e.token < 0 || e.top_logprobs.empty()) return false;
  FillProtoLogprobs(e.token, e.logprob, e.top_logprobs, out);
  return true;
}

void PromptRun::KeepPromptLogprobs(const StreamEvent& e) {
  for (const TokenLogprob& lp : e.prompt_logprobs) FillProtoLogprobs(lp.token, lp.logprob, lp.top, &prompt_logprobs_.emplace_back());
}

PromptRun::PromptRun(Clock::time_point arrival, int64_t prompt_tokens, std::string kv_policy, int64_t n_layers)
    : arrival_(arrival), submitted_(arrival), prompt_tokens_(prompt_tokens), kv_policy_(std::move(kv_policy)),
      n_layers_(n_layers) {}

void PromptRun::OnToken(const StreamEvent& e) {
  KeepPromptLogprobs(e);
  if (e.token >= 0) {
    last_token_ = Clock::now();
    if (tokens_.empty()) first_token_ = last_token_;
    tokens_.push_back(e.token);
    v1::TokenLogprobs lp;
    if (ToProtoLogprobs(e, &lp)) logprobs_.push_back(std::move(lp));
  }
  text_ += e.text;
}

void PromptRun::Finish(const StreamEvent& e, bool with_output, ServerMetrics& metrics, v1::Completion* out) {
  finished_ = true;
  const Clock::time_point end = Clock::now();
  KeepPromptLogprobs(e);
  for (v1::TokenLogprobs& lp : prompt_logprobs_) *out->add_prompt_logprobs() = std::move(lp);
  prompt_logprobs_.clear();
  text_ += e.text;
  v1::FinishReason reason = ToProtoFinishReason(e.finish_reason);
  if (!e.status.ok()) {
    reason = e.status.code() == absl::StatusCode::kCancelled ? v1::FINISH_REASON_CANCELLED : v1::FINISH_REASON_ERROR;
    out->set_error(std::string(e.status.message()));
  }
  out->set_finish_reason(reason);
  if (with_output) {
    out->mutable_token_ids()->Assign(tokens_.begin(), tokens_.end());
    out->set_text(text_);
    for (const v1::TokenLogprobs& lp : logprobs_) *out->add_logprobs() = lp;
  }
  v1::Usage* u = out->mutable_usage();
  u->set_prompt_tokens(prompt_tokens_);
  u->set_generated_tokens(generated());
  u->set_kv_tokens_kept(e.kv_tokens_kept);
  u->set_kv_entries_evicted(e.kv_entries_evicted);
  u->set_peak_kv_bytes(e.peak_kv_bytes);
  const CompressibilityEstimate& est = e.kv_compressibility;
  if (!est.empty()) {
    v1::KvCompressibility* k = u->mutable_kv_compressibility();
    k->set_trace(est.mean.trace);
    k->set_effective_rank(est.mean.effective_rank);
    k->set_spectral_tail(est.mean.spectral_tail);
    k->set_risk(e.kv_estimated_risk);
    k->set_budget_tokens(e.kv_mean_quota);
  }

  RequestOutcome o;
  o.finish_reason = MetricReason(reason);
  o.prompt_tokens = prompt_tokens_;
  o.generated_tokens = generated();
  // Arrival to hand-off, plus the engine's own wait for pages (admission).
  o.queue_seconds = Seconds(submitted_ - arrival_) + e.queue_seconds;
  o.e2e_seconds = Seconds(end - arrival_);
  if (!tokens_.empty()) o.ttft_seconds = Seconds(first_token_ - arrival_);
  if (tokens_.size() >= 2) o.mean_itl_seconds = Seconds(last_token_ - first_token_) / (tokens_.size() - 1);
  // A full cache holds every prompt and generated token in every layer (the last token's
  // entries are never written, hence the -1).
  const int64_t full = n_layers_ * (prompt_tokens_ + std::max<int64_t>(generated() - 1, 0));
  if (e.kv_tokens_kept > 0 && full > 0) o.compression_ratio = static_cast<double>(e.kv_tokens_kept) / full;
  o.kv_policy = kv_policy_;
  o.kv_entries_evicted = e.kv_entries_evicted;
  if (!est.empty()) {
    o.kv_response_trace = est.mean.trace;
    o.kv_effective_rank = est.mean.effective_rank;
    o.kv_spectral_tail = est.mean.spectral_tail;
    o.kv_estimated_risk = e.kv_estimated_risk;
  }
  metrics.ObserveRequest(o);

  v1::Timings* t = out->mutable_timings();
  t->set_queue_seconds(o.queue_seconds);
  t->set_time_to_first_token_seconds(std::max(o.ttft_seconds, 0.0));
  t->set_total_seconds(o.e2e_seconds);
}

}  // namespace kvserve
