// EngineStateCollector: builds gauge families from Engine::stats() and /proc at scrape.
// With --device cuda the KV gauges count pages in device memory (the pool's bookkeeping is on
// the host), and kvserve_device_memory_free_bytes is what the device has left.
#include "server/metrics_state_collector.h"

#include <fstream>
#include <string>

namespace kvserve {
namespace {

prometheus::MetricFamily Gauge(const char* name, const char* help, double value) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = prometheus::MetricType::Gauge;
  prometheus::ClientMetric m;
  m.gauge.value = value;
  f.metric.push_back(std::move(m));
  return f;
}

}  // namespace

ProcessMemory ReadProcessMemory() {
  ProcessMemory m;
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    // Lines look like "VmRSS:	  123456 kB".
    auto kb = [&](const char* key, double* out) {
      if (line.rfind(key, 0) == 0) *out = std::stod(line.substr(std::string(key).size())) * 1024;
    };
    kb("VmRSS:", &m.resident_bytes);
    kb("VmHWM:", &m.peak_resident_bytes);
  }
  return m;
}

std::vector<prometheus::MetricFamily> EngineStateCollector::Collect() const {
  std::vector<prometheus::MetricFamily> out;
  const ProcessMemory mem = ReadProcessMemory();
  out.push_back(Gauge("kvserve_process_resident_memory_bytes", "Resident memory of the server process.",
                      mem.resident_bytes));
  out.push_back(Gauge("kvserve_process_peak_resident_memory_bytes",
                      "Peak resident memory of the server process (VmHWM).", mem.peak_resident_bytes));
  if (Backend* b = backend_.load(); b != nullptr && !b->HostMemory()) {
    const int64_t free_bytes = b->FreeMemoryBytes();
    if (free_bytes >= 0) {
      out.push_back(Gauge("kvserve_device_memory_free_bytes", "Free memory of the compute device (KV pool, weights "
                          "and activations are allocated from it).", static_cast<double>(free_bytes)));
    }
  }
  const Engine* engine = engine_.load();
  if (engine == nullptr) return out;
  const EngineStats s = engine->stats();
  const auto d = [](int64_t v) { return static_cast<double>(v); };
  out.push_back(Gauge("kvserve_num_requests_running", "Requests admitted to the engine (prefilling or decoding).",
                      d(s.running)));
  out.push_back(Gauge("kvserve_num_requests_waiting", "Requests queued for admission.", d(s.waiting)));
  out.push_back(Gauge("kvserve_kv_pages_total", "KV pages in the pool.", d(s.pool.pages_total)));
  out.push_back(Gauge("kvserve_kv_pages_used", "KV pages holding entries.", d(s.pool.pages_used)));
  out.push_back(Gauge("kvserve_kv_pages_reserved", "KV pages promised to admitted requests (used or not).",
                      d(s.pool.pages_reserved)));
  out.push_back(Gauge("kvserve_kv_cache_usage_perc", "Fraction of KV pages in use, 0 to 1.",
                      s.pool.pages_total > 0 ? d(s.pool.pages_used) / d(s.pool.pages_total) : 0.0));
  out.push_back(Gauge("kvserve_kv_bytes_used", "KV cache bytes in use.", d(s.pool.bytes_used)));
  out.push_back(Gauge("kvserve_kv_peak_bytes", "Most KV cache bytes in use at once since start.",
                      d(s.pool.pages_peak) * d(s.pool.page_bytes)));
  return out;
}

}  // namespace kvserve
