// The serving engine: owns the KV page pool and runs the Scheduler's loop on its own
// thread. Submit and Abort are safe from any thread.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/status/statusor.h"
#include "engine/kv/page_pool.h"
#include "engine/scheduler/scheduler.h"

namespace kvserve {

struct EngineConfig {
  int64_t num_pages = 0;   // KV pool size (see kv_memory.h for sizing from bytes)
  int64_t page_size = 16;  // tokens per page
  SchedulerConfig scheduler;
  DType kv_dtype = DType::kF32;  // K/V storage (kF16 on a host backend only)
};

// A consistent snapshot for metrics and health.
struct EngineStats {
  int64_t running = 0;  // admitted sequences (prefilling or decoding)
  int64_t waiting = 0;  // queued, not yet admitted
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

  // See Scheduler::Submit. Waits at most one forward step for the engine lock: the loop
  // lets callers waiting for it in before its next step.
  absl::StatusOr<RequestHandle> Submit(EngineRequest request);
  // See Scheduler::Abort: the pages are back in the pool when this returns. Waits as Submit.
  absl::Status Abort(RequestHandle handle);
  // As of the end of the last step, Submit or Abort; never waits for a step (metrics
  // scrapes and health checks must answer while a long prefill chunk runs).
  PagePoolStats pool_stats() const;
  EngineStats stats() const;
  absl::Status CheckInvariants() const;
  // Called on the engine thread after each step (and its sink calls); must be quick. Set it
  // before the first Submit.
  void SetStepObserver(EngineStepObserver observer) { step_observer_ = std::move(observer); }

 private:
  Engine(const Model& model, const Tokenizer& tokenizer, Backend& backend, const EngineConfig& config);
  void Loop();
  void Deliver(std::vector<SinkDelivery> deliveries);
  // Takes mu_ from a thread other than the loop's. std::mutex is not fair: the loop, which
  // unlocks and relocks between steps, would win it step after step, and a Submit could wait
  // for a whole long prefill (seen: 20 s). outside_waiting_ makes the loop wait for them.
  std::unique_lock<std::mutex> LockFromOutside() const;
  void UnlockFromOutside(std::unique_lock<std::mutex>& lock) const;
  void PublishStats();  // with mu_ held

  PagePool pool_;
  mutable std::mutex mu_;  // guards scheduler_ and stop_; held for a whole step
  mutable std::condition_variable work_;
  mutable std::atomic<int> outside_waiting_{0};  // threads in LockFromOutside
  mutable std::mutex stats_mu_;                  // guards stats_
  EngineStats stats_;
  Scheduler scheduler_;
  bool stop_ = false;
  EngineStepObserver step_observer_;
  std::thread thread_;
};

}  // namespace kvserve
