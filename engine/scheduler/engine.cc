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
    : scheduler_config_(config.scheduler),
      pool_({config.num_pages, config.page_size, model.config.n_kv_heads, model.config.head_dim, config.kv_dtype},
            &backend),
      scheduler_(model, tokenizer, backend, pool_, config.scheduler) {
  PublishStats({});
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
  std::lock_guard<std::mutex> inbox(inbox_mu_);  // so the loop cannot miss the wake-up
  inbox_cv_.notify_all();  // the loop may be holding back for this caller
}

void Engine::Pending::Add(const InboxItem& item, int sign) {
  if (!item.submit) return;
  if (item.admit_now) {
    admits += sign;
    admit_pages += sign * item.peak_pages;
  } else {
    waits += sign;
  }
}

void Engine::PublishStats(const std::vector<InboxItem>& applied) {
  const EngineStats s{scheduler_.num_running(), scheduler_.num_waiting(), pool_.unpromised_pages(), pool_.stats()};
  std::lock_guard<std::mutex> lock(inbox_mu_);
  for (const InboxItem& item : applied) pending_.Add(item, -1);
  stats_ = s;
}

Engine::~Engine() {
  Stop(std::chrono::duration<double>::max());
  thread_.join();
}

bool Engine::Stop(std::chrono::duration<double> timeout) {
  std::unique_lock<std::mutex> lock(inbox_mu_);
  stop_ = true;
  inbox_cv_.notify_all();
  // wait_for with a huge duration overflows the clock arithmetic: wait without a bound then.
  if (timeout > std::chrono::hours(24 * 365)) {
    inbox_cv_.wait(lock, [&] { return stopped_; });
    return true;
  }
  return inbox_cv_.wait_for(lock, timeout, [&] { return stopped_; });
}

void Engine::Deliver(std::vector<SinkDelivery> deliveries) {
  for (const SinkDelivery& d : deliveries) {
    if (*d.sink) (*d.sink)(d.event);
  }
}

std::vector<SinkDelivery> Engine::Apply(std::vector<InboxItem>& items) {
  std::vector<SinkDelivery> refused;
  for (InboxItem& item : items) {
    if (!item.submit) {
      (void)scheduler_.Abort(item.handle);  // NOT_FOUND: it finished before the drain
      continue;
    }
    auto sink = std::make_shared<const RequestSink>(item.prepared->request.sink);
    if (absl::Status st = scheduler_.Enqueue(item.handle, *std::move(item.prepared)); !st.ok()) {
      StreamEvent e;
      e.finished = true;
      e.status = st;
      refused.push_back({std::move(sink), std::move(e)});
    }
  }
  return refused;
}

void Engine::Loop() {
  for (;;) {
    std::vector<InboxItem> items;
    bool stopping = false;
    {
      std::unique_lock<std::mutex> lock(inbox_mu_);
      // Only the loop changes the scheduler, so it may read idle() without mu_. A caller in
      // LockFromOutside goes before the next drain and step: each waits at most one step.
      inbox_cv_.wait(lock, [&] {
        return stop_ || ((!inbox_.empty() || !scheduler_.idle()) && outside_waiting_.load() == 0);
      });
      items.swap(inbox_);
      stopping = stop_;
    }
    if (!items.empty() || stopping) {
      // The drain: an Abort's pages are back, and published, before the next step starts,
      // and its CANCELLED event goes out without waiting for that step.
      std::vector<SinkDelivery> out;
      {
        std::lock_guard<std::mutex> lock(mu_);
        out = Apply(items);  // refused Submits never reached the scheduler: nothing precedes them
        if (stopping) scheduler_.AbortAll();
        for (SinkDelivery& d : scheduler_.TakeDeliveries()) out.push_back(std::move(d));
        PublishStats(items);
      }
      Deliver(std::move(out));
      if (stopping) {
        std::lock_guard<std::mutex> lock(inbox_mu_);
        stopped_ = true;
        inbox_cv_.notify_all();
        return;
      }
    }
    if (scheduler_.idle()) continue;
    std::vector<SinkDelivery> out;
    EngineStepStats step;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const auto t0 = std::chrono::steady_clock::now();
      // A failed step already told the affected sinks; the loop carries on with the rest.
      (void)scheduler_.Step();
      step.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      step.prefill = scheduler_.last_step().prefill_tokens > 0;
      step.sequences = scheduler_.last_step().sequences;
      out = scheduler_.TakeDeliveries();
      PublishStats({});
    }
    Deliver(std::move(out));
    if (step_observer_) step_observer_(step);
  }
}

absl::StatusOr<RequestHandle> Engine::Submit(EngineRequest request) {
  // The request-sized work (settings, compression set-up, validation) runs here, on the
  // caller's thread, while the loop may be in a step.
  absl::StatusOr<PreparedRequest> prepared = scheduler_.Prepare(std::move(request));
  if (!prepared.ok()) return prepared.status();
  std::lock_guard<std::mutex> lock(inbox_mu_);
  if (stop_) return absl::UnavailableError("the engine is shutting down");
  // Scheduler::HasRoomFor over the last published state and the Submits not in it yet, taken
  // as the drain will take them: in order, admitted while nothing waits and the pages fit,
  // else queued. Between a publish and the drain only the running step changes that state,
  // and a step only admits from the queue, finishes or frees, so this never accepts what the
  // drain would refuse.
  InboxItem item{0, std::nullopt, true, prepared->peak_pages, false};
  const int64_t waiting = stats_.waiting + pending_.waits;
  item.admit_now = waiting == 0 && item.peak_pages <= stats_.unpromised_pages - pending_.admit_pages &&
                   stats_.running + pending_.admits < scheduler_config_.max_batch_tokens;
  if (!item.admit_now && waiting >= scheduler_config_.max_waiting) {
    return QueueFullError(absl::StrCat("waiting queue is full (--max-waiting ", scheduler_config_.max_waiting,
                                       "); retry later"));
  }
  item.handle = next_handle_.fetch_add(1);
  item.prepared = *std::move(prepared);
  pending_.Add(item, +1);
  inbox_.push_back(std::move(item));
  inbox_cv_.notify_all();
  return inbox_.back().handle;
}

absl::Status Engine::Abort(RequestHandle handle) {
  if (handle == 0 || handle >= next_handle_.load()) {
    return absl::NotFoundError(absl::StrCat("request ", handle, " was never submitted"));
  }
  std::lock_guard<std::mutex> lock(inbox_mu_);
  inbox_.push_back({handle, std::nullopt});
  inbox_cv_.notify_all();
  return absl::OkStatus();
}

PagePoolStats Engine::pool_stats() const { return stats().pool; }

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(inbox_mu_);
  EngineStats s = stats_;
  s.running += pending_.admits;
  s.waiting += pending_.waits;
  return s;
}

absl::Status Engine::CheckInvariants() const {
  std::unique_lock<std::mutex> lock = LockFromOutside();
  absl::Status st = scheduler_.CheckInvariants();
  UnlockFromOutside(lock);
  return st;
}

}  // namespace kvserve
