// EngineStateCollector: builds gauge families from Engine::stats() and /proc at scrape.
// With --device cuda the KV gauges count pages in device memory (the pool's bookkeeping is on
// the host), and kvserve_device_memory_free_bytes is what the device has left.
#include "server/serve/metrics_state_collector.h"

#include <cstdlib>
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

double ReadCgroupMemoryLimit() {
  // /proc/self/cgroup names our cgroup ("0::/path" on v2, "N:memory:/path" on v1); inside a
  // container without a cgroup namespace that path is the host's, so the mount root is the
  // fallback.
  std::string v2 = "/", v1 = "/";
  std::ifstream cg("/proc/self/cgroup");
  for (std::string line; std::getline(cg, line);) {
    if (line.rfind("0::", 0) == 0) v2 = line.substr(3);
    const size_t at = line.find(":memory:");
    if (at != std::string::npos) v1 = line.substr(at + 8);
  }
  for (const std::string& path : {"/sys/fs/cgroup" + v2 + "/memory.max", std::string("/sys/fs/cgroup/memory.max"),
                                  "/sys/fs/cgroup/memory" + v1 + "/memory.limit_in_bytes",
                                  std::string("/sys/fs/cgroup/memory/memory.limit_in_bytes")}) {
    std::ifstream in(path);
    std::string value;
    if (!(in >> value)) continue;
    if (value == "max") return 0;
    const double bytes = std::strtod(value.c_str(), nullptr);
    return bytes > 0 && bytes < 0x1p62 ? bytes : 0;  // v1 writes ~2^63 for "no limit"
  }
  return 0;
}

std::vector<prometheus::MetricFamily> EngineStateCollector::Collect() const {
  std::vector<prometheus::MetricFamily> out;
  const ProcessMemory mem = ReadProcessMemory();
  out.push_back(Gauge("kvserve_process_resident_memory_bytes", "Resident memory of the server process.",
                      mem.resident_bytes));
  out.push_back(Gauge("kvserve_process_peak_resident_memory_bytes",
                      "Peak resident memory of the server process (VmHWM).", mem.peak_resident_bytes));
  if (const double limit = ReadCgroupMemoryLimit(); limit > 0) {
    out.push_back(Gauge("kvserve_process_memory_limit_bytes",
                        "Memory limit of the server's cgroup (a container's limit); absent when unlimited.", limit));
  }
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
  out.push_back(Gauge("kvserve_kv_bytes_total", "KV cache bytes in the pool (--kv-memory, rounded to pages).",
                      d(s.pool.pages_total) * d(s.pool.page_bytes)));
  return out;
}

}  // namespace kvserve
