#include "server/serve/grpc_log_limit.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>

#include "grpc/support/log.h"

namespace kvserve {
namespace {

constexpr int64_t kLinesPerSecond = 5;
std::atomic<int64_t> window_second{0};
std::atomic<int64_t> lines_in_window{0};
std::atomic<int64_t> dropped{0};

const char* SeverityName(gpr_log_severity s) {
  switch (s) {
    case GPR_LOG_SEVERITY_DEBUG: return "D";
    case GPR_LOG_SEVERITY_INFO: return "I";
    case GPR_LOG_SEVERITY_ERROR: return "E";
  }
  return "?";
}

void LimitedLog(gpr_log_func_args* args) {
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::steady_clock::now().time_since_epoch()).count();
  int64_t seen = window_second.load();
  if (now != seen && window_second.compare_exchange_strong(seen, now)) {
    lines_in_window.store(0);
    if (const int64_t n = dropped.exchange(0); n > 0) {
      std::fprintf(stderr, "grpc: %lld more log lines dropped (at most %lld a second are kept)\n",
                   static_cast<long long>(n), static_cast<long long>(kLinesPerSecond));
    }
  }
  if (lines_in_window.fetch_add(1) >= kLinesPerSecond) {
    dropped.fetch_add(1);
    return;
  }
  std::fprintf(stderr, "grpc %s %s:%d] %s\n", SeverityName(args->severity), args->file, args->line, args->message);
}

}  // namespace

void LimitGrpcLogging() { gpr_set_log_function(LimitedLog); }

}  // namespace kvserve
