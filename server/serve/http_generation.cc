// HttpGeneration: the engine's sinks append to per-choice pending output under one mutex and
// wake the worker; PromptRun (shared with the gRPC reactors) keeps the timings, reports the
// metrics and makes the final Completion, so both APIs count a request the same way.
#include "server/serve/http_generation.h"

#include <condition_variable>
#include <mutex>

#include "server/serve/grpc_prompt_run.h"
#include "server/serve/grpc_request.h"

namespace kvserve {

void ChoiceOutput::Append(ChoiceOutput&& later) {
  tokens.insert(tokens.end(), later.tokens.begin(), later.tokens.end());
  text += later.text;
  for (TokenLogprob& lp : later.logprobs) logprobs.push_back(std::move(lp));
  for (TokenLogprob& lp : later.prompt_logprobs) prompt_logprobs.push_back(std::move(lp));
  if (later.final) final = std::move(later.final);
}

struct HttpGeneration::State {
  std::mutex mu;
  std::condition_variable changed;
  std::vector<PromptRun> runs;
  std::vector<ChoiceOutput> pending;
  std::vector<RequestHandle> handles;  // 0 until submitted
  int64_t running = 0;                 // choices whose final event has not come
};

HttpGeneration::HttpGeneration(const ServeContext& ctx, std::shared_ptr<State> state)
    : ctx_(ctx), state_(std::move(state)) {}

absl::StatusOr<std::unique_ptr<HttpGeneration>> HttpGeneration::Start(const ServeContext& ctx,
                                                                       std::vector<EngineRequest> requests) {
  const auto arrival = PromptRun::Clock::now();
  if (!ctx.tracker.BeginCall()) {
    ctx.metrics.ObserveRejected("draining");
    return absl::UnavailableError("server is draining; retry on another replica");
  }
  auto state = std::make_shared<State>();
  const int64_t n = static_cast<int64_t>(requests.size());
  for (int64_t i = 0; i < n; ++i) {
    state->runs.emplace_back(arrival, static_cast<int64_t>(requests[i].prompt.size()),
                             requests[i].kv.policy.value_or(ctx.kv_defaults.policy), ctx.model.config.n_layers);
    state->pending.emplace_back().index = i;
  }
  state->handles.assign(n, 0);
  state->running = n;
  // From here the destructor ends the call and aborts whatever was submitted.
  std::unique_ptr<HttpGeneration> gen(new HttpGeneration(ctx, state));
  for (int64_t i = 0; i < n; ++i) {
    EngineRequest& r = requests[i];
    r.sink = [s = state, i, &metrics = ctx.metrics](const StreamEvent& e) {
      {
        std::lock_guard<std::mutex> lock(s->mu);
        PromptRun& run = s->runs[i];
        if (run.finished()) return;
        ChoiceOutput& out = s->pending[i];
        out.prompt_logprobs.insert(out.prompt_logprobs.end(), e.prompt_logprobs.begin(), e.prompt_logprobs.end());
        if (!e.finished) {
          run.OnToken(e);
          if (e.token >= 0) out.tokens.push_back(e.token);
          out.text += e.text;
          if (e.token >= 0 && !e.top_logprobs.empty()) out.logprobs.push_back({e.token, e.logprob, e.top_logprobs});
        } else {
          out.text += e.text;
          v1::Completion done;
          run.Finish(e, /*with_output=*/false, metrics, &done);
          out.final = std::move(done);
          --s->running;
        }
      }
      s->changed.notify_all();
    };
    state->runs[i].MarkSubmitted();
    absl::StatusOr<RequestHandle> h = ctx.engine.Submit(std::move(r));
    if (!h.ok()) {
      ctx.metrics.ObserveRejected(RejectReason(h.status()));
      return h.status();  // the destructor aborts choices 0..i-1
    }
    ctx.tracker.AddHandle(*h);
    std::lock_guard<std::mutex> lock(state->mu);
    state->handles[i] = *h;
  }
  return gen;
}

HttpGeneration::~HttpGeneration() {
  Abort();
  std::vector<RequestHandle> handles;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    handles = state_->handles;
  }
  for (RequestHandle h : handles) {
    if (h != 0) ctx_.tracker.RemoveHandle(h);
  }
  ctx_.tracker.EndCall();
}

std::vector<ChoiceOutput> HttpGeneration::Take(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(state_->mu);
  auto any = [&] {
    for (const ChoiceOutput& o : state_->pending) {
      if (!o.empty()) return true;
    }
    return false;
  };
  state_->changed.wait_for(lock, timeout, any);
  std::vector<ChoiceOutput> out;
  for (ChoiceOutput& o : state_->pending) {
    if (o.empty()) continue;
    out.push_back(std::move(o));
    o = ChoiceOutput{};
    o.index = out.back().index;
  }
  return out;
}

bool HttpGeneration::done() {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->running > 0) return false;
  for (const ChoiceOutput& o : state_->pending) {
    if (!o.empty()) return false;
  }
  return true;
}

void HttpGeneration::Abort() {
  std::vector<RequestHandle> live;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    for (size_t i = 0; i < state_->handles.size(); ++i) {
      if (state_->handles[i] != 0 && !state_->runs[i].finished()) live.push_back(state_->handles[i]);
    }
  }
  // Never under the mutex: Abort delivers the final CANCELLED event to the sink.
  for (RequestHandle h : live) (void)ctx_.engine.Abort(h);
}

}  // namespace kvserve
