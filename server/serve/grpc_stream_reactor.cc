// The streaming reactor. Its state lives in a shared block that the engine's sink also
// holds, because the engine can deliver an event after the reactor is gone. Whoever
// claims the next action (a write or Finish) under the mutex performs it after unlocking;
// only one action is outstanding at a time, so the reactor cannot be destroyed under it.
#include "server/serve/grpc_stream_reactor.h"

#include <memory>
#include <mutex>
#include <optional>

#include "server/serve/grpc_prompt_run.h"
#include "server/serve/grpc_request.h"

namespace kvserve {
namespace {

using Reactor = grpc::ServerWriteReactor<v1::GenerateStreamResponse>;

class StreamReactor;

struct StreamState {
  enum class Action { kNone, kWrite, kFinish };

  explicit StreamState(PromptRun r) : run(std::move(r)) {}

  std::mutex mu;
  Reactor* reactor = nullptr;  // valid while an action is claimed or before Finish
  PromptRun run;
  std::string request_id;
  std::vector<int32_t> pending_tokens;  // output not yet written
  std::vector<v1::TokenLogprobs> pending_logprobs;
  std::string pending_text;
  std::optional<v1::Completion> final_completion;  // the report, sent after all chunks
  bool ready = false;          // the constructor has finished submitting
  bool write_in_flight = false;
  bool finish_called = false;
  bool cancelled = false;      // client cancel, deadline, or a failed write
  bool final_written = false;
  bool engine_active = false;  // the engine may still hold the request
  RequestHandle handle = 0;
  grpc::Status finish_status;
  v1::GenerateStreamResponse msg;  // the one message in flight

  // Decides the next action; the caller performs it after unlocking.
  Action NextLocked() {
    if (!ready || write_in_flight || finish_called) return Action::kNone;
    if (cancelled) {
      finish_called = true;
      finish_status = grpc::Status(grpc::StatusCode::CANCELLED, "call cancelled");
      return Action::kFinish;
    }
    if (!pending_tokens.empty() || !pending_text.empty()) {
      // Everything that arrived during the previous write goes out as one chunk.
      msg.Clear();
      msg.set_request_id(request_id);
      v1::StreamChunk* c = msg.mutable_chunk();
      c->mutable_token_ids()->Assign(pending_tokens.begin(), pending_tokens.end());
      for (v1::TokenLogprobs& lp : pending_logprobs) *c->add_logprobs() = std::move(lp);
      pending_logprobs.clear();
      c->set_text(std::move(pending_text));
      pending_tokens.clear();
      pending_text.clear();
      write_in_flight = true;
      return Action::kWrite;
    }
    if (final_completion) {
      msg.Clear();
      msg.set_request_id(request_id);
      *msg.mutable_complete() = *std::move(final_completion);
      final_completion.reset();
      final_written = true;
      write_in_flight = true;
      return Action::kWrite;
    }
    if (final_written) {
      finish_called = true;
      finish_status = grpc::Status::OK;
      return Action::kFinish;
    }
    return Action::kNone;
  }
};

// Performs a claimed action, outside the mutex.
void Perform(StreamState& s, StreamState::Action a) {
  if (a == StreamState::Action::kWrite) {
    s.reactor->StartWrite(&s.msg);
  } else if (a == StreamState::Action::kFinish) {
    s.reactor->Finish(s.finish_status);
  }
}

class StreamReactor : public Reactor {
 public:
  StreamReactor(const ServeContext& ctx, const v1::GenerateRequest& req)
      : ctx_(ctx) {
    const auto arrival = PromptRun::Clock::now();
    if (!ctx.tracker.BeginCall()) {
      tracked_ = false;
      ctx.metrics.ObserveRejected("draining");
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server is draining; retry on another replica"));
      return;
    }
    absl::StatusOr<std::vector<EngineRequest>> built = BuildEngineRequests(ctx, req, /*streaming=*/true);
    if (!built.ok()) {
      ctx.metrics.ObserveRejected(RejectReason(built.status()));
      Finish(ToGrpcStatus(built.status()));
      return;
    }
    EngineRequest& er = built->front();
    state_ = std::make_shared<StreamState>(
        PromptRun(arrival, static_cast<int64_t>(er.prompt.size()), er.kv.policy.value_or(ctx.kv_defaults.policy), ctx.model.config.n_layers));
    state_->reactor = this;
    state_->request_id = req.request_id();
    er.sink = [s = state_, &metrics = ctx.metrics](const StreamEvent& e) {
      StreamState::Action a;
      {
        std::lock_guard<std::mutex> lock(s->mu);
        if (s->run.finished()) return;
        if (!e.finished) {
          s->run.OnToken(e);
          if (e.token >= 0) s->pending_tokens.push_back(e.token);
          v1::TokenLogprobs lp;
          if (ToProtoLogprobs(e, &lp)) s->pending_logprobs.push_back(std::move(lp));
          s->pending_text += e.text;
        } else {
          // Trailing text goes out as a last chunk; the complete message is the report.
          s->engine_active = false;
          s->pending_text += e.text;
          v1::Completion done;
          s->run.Finish(e, /*with_output=*/false, metrics, &done);
          s->final_completion = std::move(done);
        }
        a = s->NextLocked();
      }
      Perform(*s, a);
    };
    state_->run.MarkSubmitted();
    absl::StatusOr<RequestHandle> h = ctx.engine.Submit(std::move(er));
    if (!h.ok()) {
      ctx.metrics.ObserveRejected(RejectReason(h.status()));
      state_->finish_called = true;  // the sink is never called for a rejected request
      Finish(ToGrpcStatus(h.status()));
      return;
    }
    ctx.tracker.AddHandle(*h);
    StreamState::Action a;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->handle = *h;
      state_->engine_active = !state_->run.finished();
      state_->ready = true;
      a = Claim();
    }
    Perform(*state_, a);
  }

  void OnWriteDone(bool ok) override {
    StreamState::Action a;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->write_in_flight = false;
      if (!ok) state_->cancelled = true;  // the client went away
    }
    if (!ok) AbortEngine();
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      a = Claim();
    }
    Perform(*state_, a);
  }

  void OnCancel() override {
    if (!state_) return;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->cancelled = true;
    }
    // The engine frees the pages at its next step boundary and then sends the final CANCELLED event.
    AbortEngine();
    StreamState::Action a;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      a = Claim();
    }
    Perform(*state_, a);
  }

  void OnDone() override {
    if (state_) {
      AbortEngine();  // normally a no-op: the request has finished
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->reactor = nullptr;
      if (state_->handle != 0) ctx_.tracker.RemoveHandle(state_->handle);
    }
    if (tracked_) ctx_.tracker.EndCall();
    delete this;
  }

 private:
  StreamState::Action Claim() { return state_->NextLocked(); }

  void AbortEngine() {
    RequestHandle h = 0;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      if (state_->engine_active) h = state_->handle;
      state_->engine_active = false;
    }
    if (h != 0) (void)ctx_.engine.Abort(h);  // queued: the engine frees the pages after its step
  }

  const ServeContext& ctx_;
  std::shared_ptr<StreamState> state_;
  bool tracked_ = true;
};

}  // namespace

Reactor* StartGenerateStream(const ServeContext& ctx, grpc::CallbackServerContext* /*call*/,
                             const v1::GenerateRequest& request) {
  return new StreamReactor(ctx, request);
}

}  // namespace kvserve
