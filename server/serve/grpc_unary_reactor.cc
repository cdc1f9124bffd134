// The unary Generate reactor. As in the streaming one, the state the engine's sinks touch
// is a shared block, and Finish is claimed under its mutex exactly once: by the last
// prompt to finish, by a cancel, or by a failed submission.
#include "server/serve/grpc_unary_reactor.h"

#include <memory>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/serve/grpc_prompt_run.h"
#include "server/serve/grpc_request.h"

namespace kvserve {
namespace {

struct UnaryState {
  std::mutex mu;
  std::vector<PromptRun> runs;
  std::vector<RequestHandle> handles;   // 0 until submitted
  v1::GenerateResponse* response = nullptr;  // valid until Finish is called
  int remaining = 0;
  bool finish_called = false;
};

class UnaryReactor : public grpc::ServerUnaryReactor {
 public:
  UnaryReactor(const ServeContext& ctx, const v1::GenerateRequest& req, v1::GenerateResponse* response)
      : ctx_(ctx), state_(std::make_shared<UnaryState>()) {
    const auto arrival = PromptRun::Clock::now();
    // Every early Finish below marks finish_called, so a later OnCancel cannot finish twice.
    if (!ctx.tracker.BeginCall()) {
      tracked_ = false;
      state_->finish_called = true;
      ctx.metrics.ObserveRejected("draining");
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server is draining; retry on another replica"));
      return;
    }
    absl::StatusOr<std::vector<EngineRequest>> built = BuildEngineRequests(ctx, req, /*streaming=*/false);
    if (!built.ok()) {
      state_->finish_called = true;
      ctx.metrics.ObserveRejected(RejectReason(built.status()));
      Finish(ToGrpcStatus(built.status()));
      return;
    }
    const int n = static_cast<int>(built->size());
    response->set_request_id(req.request_id());
    for (int i = 0; i < n; ++i) {
      v1::Completion* c = response->add_completions();
      c->set_index(static_cast<uint32_t>(i));
      state_->runs.emplace_back(arrival, static_cast<int64_t>((*built)[i].prompt.size()), (*built)[i].kv.policy.value_or(ctx.kv_defaults.policy),
                                ctx.model.config.n_layers);
    }
    state_->response = response;
    state_->handles.assign(n, 0);
    state_->remaining = n;  // counts every prompt up front, so none can finish the call early
    for (int i = 0; i < n; ++i) {
      EngineRequest& er = (*built)[i];
      er.sink = [s = state_, i, this, &metrics = ctx.metrics](const StreamEvent& e) {
        bool finish = false;
        {
          std::lock_guard<std::mutex> lock(s->mu);
          PromptRun& run = s->runs[i];
          if (run.finished() || s->finish_called) {
            if (e.finished && !run.finished()) {
              v1::Completion ignored;
              run.Finish(e, false, metrics, &ignored);  // still counted in the metrics
            }
            return;
          }
          if (!e.finished) {
            run.OnToken(e);
            return;
          }
          run.Finish(e, /*with_output=*/true, metrics, s->response->mutable_completions(i));
          finish = --s->remaining == 0;
          if (finish) s->finish_called = true;
        }
        // Safe: Finish has not been called, so OnDone cannot have deleted the reactor.
        if (finish) Finish(grpc::Status::OK);
      };
      state_->runs[i].MarkSubmitted();
      absl::StatusOr<RequestHandle> h = ctx.engine.Submit(std::move(er));
      if (!h.ok()) {
        ctx.metrics.ObserveRejected(RejectReason(h.status()));
        {
          std::lock_guard<std::mutex> lock(state_->mu);
          state_->finish_called = true;
        }
        AbortSubmitted();
        Finish(grpc::Status(static_cast<grpc::StatusCode>(h.status().code()),
                            absl::StrCat("prompts[", i, "]: ", h.status().message())));
        return;
      }
      ctx.tracker.AddHandle(*h);
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->handles[i] = *h;
    }
  }

  void OnCancel() override {
    bool finish = false;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      finish = !state_->finish_called;
      state_->finish_called = true;
    }
    AbortSubmitted();  // the engine frees the pages after its step
    if (finish) Finish(grpc::Status(grpc::StatusCode::CANCELLED, "call cancelled"));
  }

  void OnDone() override {
    AbortSubmitted();  // normally a no-op: every prompt has finished
    for (RequestHandle h : Handles()) ctx_.tracker.RemoveHandle(h);
    if (tracked_) ctx_.tracker.EndCall();
    delete this;
  }

 private:
  std::vector<RequestHandle> Handles() {
    std::lock_guard<std::mutex> lock(state_->mu);
    std::vector<RequestHandle> out;
    for (RequestHandle h : state_->handles) {
      if (h != 0) out.push_back(h);
    }
    return out;
  }

  // Aborts the prompts still in the engine (queued: their pages come back after the step under way).
  void AbortSubmitted() {
    std::vector<RequestHandle> live;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      for (size_t i = 0; i < state_->handles.size(); ++i) {
        if (state_->handles[i] != 0 && !state_->runs[i].finished()) live.push_back(state_->handles[i]);
      }
    }
    for (RequestHandle h : live) (void)ctx_.engine.Abort(h);
  }

  const ServeContext& ctx_;
  std::shared_ptr<UnaryState> state_;
  bool tracked_ = true;
};

}  // namespace

grpc::ServerUnaryReactor* StartGenerate(const ServeContext& ctx, grpc::CallbackServerContext* /*call*/,
                                        const v1::GenerateRequest& request, v1::GenerateResponse* response) {
  return new UnaryReactor(ctx, request, response);
}

}  // namespace kvserve
