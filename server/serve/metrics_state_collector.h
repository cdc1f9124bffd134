// Gauges read at scrape time, so a scrape always sees the engine as it is now: requests
// running and waiting, KV pages, peak KV bytes, process memory and its cgroup limit, and a
// device's free memory.
#pragma once
#include <atomic>
#include <vector>

#include "engine/scheduler/engine.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace kvserve {

class EngineStateCollector : public prometheus::Collectable {
 public:
  // Until set_engine is called (the model is loading) only process memory is reported.
  void set_engine(const Engine* engine) { engine_.store(engine); }
  // With a device backend (not host memory), scrapes also report its free memory. Set before
  // set_engine; the backend must outlive the collector's use (set nullptr first).
  void set_backend(Backend* backend) { backend_.store(backend); }
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::atomic<const Engine*> engine_{nullptr};
  std::atomic<Backend*> backend_{nullptr};
};

// VmRSS and VmHWM of this process from /proc/self/status, in bytes (0 when unreadable).
struct ProcessMemory {
  double resident_bytes = 0;
  double peak_resident_bytes = 0;
};
ProcessMemory ReadProcessMemory();

// The memory limit of this process's cgroup (v2 memory.max, else v1 memory.limit_in_bytes) in
// bytes, 0 when there is none: a container's limit, which RSS alerts compare against.
double ReadCgroupMemoryLimit();

}  // namespace kvserve
