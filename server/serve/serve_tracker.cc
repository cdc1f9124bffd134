// RequestTracker: a counter of live calls under a mutex, and the engine handles they own.
#include "server/serve/serve_tracker.h"

namespace kvserve {

bool RequestTracker::BeginCall() {
  std::lock_guard<std::mutex> lock(mu_);
  if (draining_) return false;
  ++calls_;
  return true;
}

void RequestTracker::EndCall() {
  std::lock_guard<std::mutex> lock(mu_);
  if (--calls_ == 0) idle_.notify_all();
}

void RequestTracker::AddHandle(RequestHandle h) {
  std::lock_guard<std::mutex> lock(mu_);
  handles_.insert(h);
}

void RequestTracker::RemoveHandle(RequestHandle h) {
  std::lock_guard<std::mutex> lock(mu_);
  handles_.erase(h);
}

void RequestTracker::StartDrain() {
  std::lock_guard<std::mutex> lock(mu_);
  draining_ = true;
}

bool RequestTracker::draining() const {
  std::lock_guard<std::mutex> lock(mu_);
  return draining_;
}

bool RequestTracker::WaitIdle(std::chrono::duration<double> timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return idle_.wait_for(lock, timeout, [&] { return calls_ == 0; });
}

std::vector<RequestHandle> RequestTracker::handles() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {handles_.begin(), handles_.end()};
}

int64_t RequestTracker::calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return calls_;
}

}  // namespace kvserve
