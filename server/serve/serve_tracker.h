// Which generation calls are in flight, so SIGTERM can stop admission, wait for them to
// drain and then cancel what is left.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <set>
#include <vector>

#include "engine/scheduler/request.h"

namespace kvserve {

class RequestTracker {
 public:
  // Registers a call; false once draining (the caller answers UNAVAILABLE).
  bool BeginCall();
  void EndCall();
  // Engine requests of live calls; Cancel aborts these. Aborting one that has already
  // finished is harmless (the engine answers NOT_FOUND), so calls remove theirs at the end.
  void AddHandle(RequestHandle h);
  void RemoveHandle(RequestHandle h);

  void StartDrain();
  bool draining() const;
  // Waits until no call is in flight or the timeout passes; true when drained.
  bool WaitIdle(std::chrono::duration<double> timeout);
  std::vector<RequestHandle> handles() const;
  int64_t calls() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable idle_;
  int64_t calls_ = 0;
  bool draining_ = false;
  std::set<RequestHandle> handles_;
};

}  // namespace kvserve
