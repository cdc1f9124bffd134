// The serving engine: owns the KV page pool and runs the Scheduler's loop on its own
// thread. Submit and Abort are safe from any thread and never wait for a step: they leave
// their work in an inbox the loop drains between steps.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/kv/page_pool.h"
#include "engine/scheduler/scheduler.h"

namespace kvserve {

struct EngineConfig {
  int64_t num_pages = 0;   // KV pool size (see kv_memory.h for sizing from bytes)
  int64_t page_size = 16;  // tokens per page
  SchedulerConfig scheduler;
  DType kv_dtype = DType::kF32;  // K/V storage (kF16 on a host backend only; the commands default to DefaultKvDType)
};

// A consistent snapshot for metrics and health.
struct EngineStats {
  int64_t running = 0;  // admitted sequences (prefilling or decoding)
  int64_t waiting = 0;  // queued, not yet admitted (the scheduler's queue and the inbox's)
  int64_t unpromised_pages = 0;  // free pages no admitted sequence has reserved
  PagePoolStats pool;
};

// What one engine step did, for step-time metrics.
struct EngineStepStats {
  double seconds = 0;
  // The step carried at least one prefill chunk (a mixed prefill+decode step counts as
  // prefill, since the chunk dominates its time); otherwise it was pure decode.
  bool prefill = false;
  int64_t sequences = 0;  // sequences in the step's batch
};
using EngineStepObserver = std::function<void(const EngineStepStats&)>;

class Engine {
 public:
  // Validates the config (messages name the flag and value) and starts the loop thread. The
  // KV pool is allocated in the backend's memory; on a device backend, default KV settings
  // without a device form (CheckDeviceForm) are INVALID_ARGUMENT.
  // model, tokenizer and backend must outlive the engine.
  static absl::StatusOr<std::unique_ptr<Engine>> Start(const Model& model, const Tokenizer& tokenizer,
                                                       Backend& backend, const EngineConfig& config);
  // Cancels what is left (sinks get CANCELLED) and joins the loop thread.
  ~Engine();

  // Checks and sizes the request on the calling thread (Scheduler::Prepare: INVALID_ARGUMENT,
  // or RESOURCE_EXHAUSTED when it can never fit), answers QueueFullError when the waiting
  // queue is full, else leaves it in the inbox and returns its handle; the loop queues or
  // admits it before its next step. Never waits for a step. Should the queue turn out full at
  // the drain after all (Submit's count is taken from the last step's state, which can only
  // overstate the load, so this is not expected), the sink gets a final QueueFullError event.
  absl::StatusOr<RequestHandle> Submit(EngineRequest request);
  // Cancels a waiting or running request at the next step boundary: its pages go back to the
  // pool and its sink gets a final CANCELLED event then, on the engine thread (the step under
  // way, if any, finishes first). OK once queued, also for a request that finishes meanwhile;
  // NOT_FOUND for a handle Submit never returned. Never waits for a step.
  absl::Status Abort(RequestHandle handle);
  // As of the end of the last step or drain; never waits for a step (metrics scrapes and
  // health checks must answer while a long prefill chunk runs).
  PagePoolStats pool_stats() const;
  EngineStats stats() const;
  // Waits for the step under way, if any (tests).
  absl::Status CheckInvariants() const;
  // Asks the loop to cancel everything and end, and waits up to `timeout` for it: false when
  // a step is still running then (a stuck engine; the process should exit without it). The
  // destructor waits without a bound.
  bool Stop(std::chrono::duration<double> timeout);
  // Called on the engine thread after each step (and its sink calls); must be quick. Set it
  // before the first Submit.
  void SetStepObserver(EngineStepObserver observer) { step_observer_ = std::move(observer); }

 private:
  Engine(const Model& model, const Tokenizer& tokenizer, Backend& backend, const EngineConfig& config);
  // One Submit (submit, with its prepared request) or Abort waiting for the loop.
  struct InboxItem {
    RequestHandle handle = 0;
    std::optional<PreparedRequest> prepared;  // moved out by the drain
    bool submit = false;
    int64_t peak_pages = 0;   // a Submit's reservation
    bool admit_now = false;   // Submit expected the drain to admit it (else to queue it)
  };
  // Submits handed to the loop that the published stats do not show yet (in the inbox, or
  // drained and not yet published), as Submit expects the drain to take them.
  struct Pending {
    int64_t admits = 0, admit_pages = 0, waits = 0;
    void Add(const InboxItem& item, int sign);
  };

  void Loop();
  // Applies the drained inbox to the scheduler, in arrival order (with mu_ held); returns the
  // final events of Submits the scheduler refused after all (a full queue).
  std::vector<SinkDelivery> Apply(std::vector<InboxItem>& items);
  void Deliver(std::vector<SinkDelivery> deliveries);
  // Takes mu_ from a thread other than the loop's (CheckInvariants). std::mutex is not fair:
  // the loop, which unlocks and relocks between steps, would win it step after step.
  // outside_waiting_ makes the loop wait for them.
  std::unique_lock<std::mutex> LockFromOutside() const;
  void UnlockFromOutside(std::unique_lock<std::mutex>& lock) const;
  // With mu_ held: publishes the scheduler's state and retires the drained `applied` from
  // pending_ in the same critical section, so Submit never counts a request twice or not at all.
  void PublishStats(const std::vector<InboxItem>& applied);

  const SchedulerConfig scheduler_config_;
  PagePool pool_;
  mutable std::mutex mu_;  // guards scheduler_; the loop holds it for a drain and a step
  Scheduler scheduler_;

  // The inbox and the published stats. Never held across a step (only for a few field
  // reads and writes), so Submit, Abort and stats() answer at once.
  mutable std::mutex inbox_mu_;
  mutable std::condition_variable inbox_cv_;  // the loop waits here for work
  std::vector<InboxItem> inbox_;
  Pending pending_;
  EngineStats stats_;  // the scheduler's state as of the last publish, pending_ not included
  bool stop_ = false;     // the loop should cancel everything and end
  bool stopped_ = false;  // it has
  mutable std::atomic<int> outside_waiting_{0};  // threads in LockFromOutside
  std::atomic<RequestHandle> next_handle_{1};

  EngineStepObserver step_observer_;
  std::thread thread_;
};

}  // namespace kvserve
