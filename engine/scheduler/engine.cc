// The engine loop thread around the Scheduler.
#include "engine/scheduler/engine.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "engine/compress/device_form.h"

namespace kvserve {

absl::StatusOr<std::unique_ptr<Engine>> Engine::Start(const Model& model, const Tokenizer& tokenizer,
                                                      Backend& backend, const EngineConfig& config) {
  if (absl::Status st = CheckKvDType(config.kv_dtype, backend); !st.ok()) return st;
  if (config.page_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--page-size must be >= 1, got ", config.page_size));
  }
  if (config.num_pages < 1 || config.num_pages > INT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat("KV pool must have 1 to ", INT32_MAX, " pages, got ",
                                                   config.num_pages));
  }
  if (absl::Status st = ValidateSchedulerConfig(config.scheduler); !st.ok()) return st;
  // Requests that leave their KV fields empty take these defaults, so on a device backend a
  // default without a device form would refuse every such request: refuse the engine instead.
  if (!backend.HostMemory()) {
    if (absl::Status st = CheckDeviceForm(config.scheduler.kv_defaults, backend.Name()); !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("the default --kv-policy/--kv-budget: ", st.message()));
    }
  }
  return std::unique_ptr<Engine>(new Engine(model, tokenizer, backend, config));
}

Engine::Engine(const Model& model, const Tokenizer& tokenizer, Backend& backend, const EngineConfig& config)
    // The pool lives in the backend's memory (device memory for CUDA): the forward pass and
    // the device compressor read and write pages there, and nothing in the scheduler touches
    // page contents on the host.
    : pool_({config.num_pages, config.page_size, model.config.n_kv_heads, model.config.head_dim, config.kv_dtype},
            &backend),
      scheduler_(model, tokenizer, backend, pool_, config.scheduler) {
  PublishStats();
  thread_ = std::thread([this] { Loop(); });
}

std::unique_lock<std::mutex> Engine::LockFromOutside() const {
  outside_waiting_.fetch_add(1);
  std::unique_lock<std::mutex> lock(mu_);
  outside_waiting_.fetch_sub(1);
  return lock;
}

void Engine::UnlockFromOutside(std::unique_lock<std::mutex>& lock) const {
  lock.unlock();
  work_.notify_all();  // the loop may be holding back for this caller, or have new work
}

void Engine::PublishStats() {
  const EngineStats s{scheduler_.num_running(), scheduler_.num_waiting(), pool_.stats()};
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_ = s;
}

Engine::~Engine() {
  std::vector<SinkDelivery> last;
  {
    std::unique_lock<std::mutex> lock = LockFromOutside();
    stop_ = true;
    scheduler_.AbortAll();
    last = scheduler_.TakeDeliveries();
    UnlockFromOutside(lock);
  }
  thread_.join();
  Deliver(std::move(last));
}

void Engine::Deliver(std::vector<SinkDelivery> deliveries) {
  for (const SinkDelivery& d : deliveries) {
    if (*d.sink) (*d.sink)(d.event);
  }
}

void Engine::Loop() {
  for (;;) {
    std::vector<SinkDelivery> out;
    EngineStepStats step;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Callers waiting for the lock go first: each waits at most the step that held it.
      work_.wait(lock, [&] { return stop_ || (!scheduler_.idle() && outside_waiting_.load() == 0); });
      if (stop_) return;
      const auto t0 = std::chrono::steady_clock::now();
      // A failed step already told the affected sinks; the loop carries on with the rest.
      (void)scheduler_.Step();
      step.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      step.prefill = scheduler_.last_step().prefill_tokens > 0;
      step.sequences = scheduler_.last_step().sequences;
      out = scheduler_.TakeDeliveries();
      PublishStats();
    }
    Deliver(std::move(out));
    if (step_observer_) step_observer_(step);
  }
}

absl::StatusOr<RequestHandle> Engine::Submit(EngineRequest request) {
  absl::StatusOr<RequestHandle> h;
  std::vector<SinkDelivery> out;
  {
    std::unique_lock<std::mutex> lock = LockFromOutside();
    h = scheduler_.Submit(std::move(request));
    out = scheduler_.TakeDeliveries();
    PublishStats();
    UnlockFromOutside(lock);
  }
  Deliver(std::move(out));
  return h;
}

absl::Status Engine::Abort(RequestHandle handle) {
  absl::Status st;
  std::vector<SinkDelivery> out;
  {
    std::unique_lock<std::mutex> lock = LockFromOutside();
    st = scheduler_.Abort(handle);
    out = scheduler_.TakeDeliveries();
    PublishStats();
    UnlockFromOutside(lock);
  }
  Deliver(std::move(out));
  return st;
}

PagePoolStats Engine::pool_stats() const { return stats().pool; }

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
}

absl::Status Engine::CheckInvariants() const {
  std::unique_lock<std::mutex> lock = LockFromOutside();
  absl::Status st = scheduler_.CheckInvariants();
  UnlockFromOutside(lock);
  return st;
}

}  // namespace kvserve
