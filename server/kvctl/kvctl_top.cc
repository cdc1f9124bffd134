// `kvctl top`: a terminal view of one server's /metrics, refreshed every --interval seconds,
// for a user without Grafana. Rates (tokens/s, latencies) are over the last refresh.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "httplib.h"
#include "server/flags/cli_args.h"
#include "server/kvctl/kvctl_commands.h"

namespace kvserve::kvctl {
namespace {

// GET /metrics (cpp-httplib's client); the body, or an error naming the URL.
absl::StatusOr<std::string> Fetch(const std::string& host, const std::string& port) {
  int port_number = 0;
  if (!absl::SimpleAtoi(port, &port_number) || port_number < 1 || port_number > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("metrics port '", port, "' is not a port number"));
  }
  httplib::Client client(host, port_number);
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(5, 0);
  const httplib::Result r = client.Get("/metrics");
  const std::string url = absl::StrCat("http://", host, ":", port, "/metrics");
  if (!r) return absl::UnavailableError(absl::StrCat("GET ", url, " failed: ", httplib::to_string(r.error())));
  if (r->status != 200) return absl::UnavailableError(absl::StrCat("GET ", url, " answered HTTP ", r->status));
  return r->body;
}

// Sample name -> value, summed over label sets (a family's total).
std::map<std::string, double> Parse(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t name_end = line.find_first_of("{ ");
    const size_t value_at = line.rfind(' ');
    if (name_end == std::string::npos || value_at == std::string::npos) continue;
    out[line.substr(0, name_end)] += std::strtod(line.c_str() + value_at + 1, nullptr);
  }
  return out;
}

std::string Bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  for (; b >= 1024 && u < 4; ++u) b /= 1024;
  return absl::StrFormat("%.1f %s", b, units[u]);
}

std::string Bar(double frac) {
  constexpr int kWidth = 30;
  const int n = std::clamp(static_cast<int>(frac * kWidth + 0.5), 0, kWidth);
  std::string bar(kWidth + 2, '.');
  bar.front() = '[';
  bar.back() = ']';
  for (int i = 1; i <= n; ++i) bar[i] = '#';
  return bar;
}

}  // namespace

int RunTop(int argc, char** argv) {
  static const char kUsage[] =
      "kvctl top [--metrics HOST:PORT=localhost:9400] [--interval SECONDS=1] [--count N (0: until Ctrl-C)]\n";
  absl::StatusOr<CliArgs> args = CliArgs::Parse(argc, argv, {"metrics", "interval", "count"}, {}, kUsage);
  if (!args.ok()) {
    std::fprintf(stderr, "%s\n%s", std::string(args.status().message()).c_str(), kUsage);
    return 2;
  }
  if (args->help()) return 0;
  const std::string target = args->Get("metrics").value_or("localhost:9400");
  const size_t colon = target.rfind(':');
  const std::string host = colon == std::string::npos ? target : target.substr(0, colon);
  const std::string port = colon == std::string::npos ? "9400" : target.substr(colon + 1);
  absl::StatusOr<double> interval = args->GetDouble("interval", 1);
  absl::StatusOr<int64_t> count = args->GetInt("count", 0);
  if (!interval.ok() || !count.ok() || *interval <= 0) {
    std::fprintf(stderr, "kvctl top: --interval must be > 0 seconds and --count an integer\n");
    return 2;
  }
  const bool tty = isatty(STDOUT_FILENO);
  std::map<std::string, double> prev;
  auto prev_t = std::chrono::steady_clock::now();
  for (int64_t frame = 0; *count == 0 || frame < *count; ++frame) {
    if (frame > 0) std::this_thread::sleep_for(std::chrono::duration<double>(*interval));
    absl::StatusOr<std::string> body = Fetch(host, port);
    if (!body.ok()) {
      std::fprintf(stderr, "kvctl top: %s\n", std::string(body.status().message()).c_str());
      return 1;
    }
    std::map<std::string, double> m = Parse(*body);
    const auto now = std::chrono::steady_clock::now();
    const double dt = std::chrono::duration<double>(now - prev_t).count();
    // Per-second rate of a counter, and the mean of a histogram, since the last frame.
    auto rate = [&](const std::string& k) { return prev.empty() ? 0.0 : (m[k] - prev[k]) / dt; };
    auto mean = [&](const std::string& h) {
      const double n = m[h + "_count"] - prev[h + "_count"];
      return n > 0 ? (m[h + "_sum"] - prev[h + "_sum"]) / n * 1e3 : 0.0;
    };
    const double total = m["kvserve_kv_pages_total"];
    const double used = total > 0 ? m["kvserve_kv_pages_used"] / total : 0;
    const double reserved = total > 0 ? m["kvserve_kv_pages_reserved"] / total : 0;
    std::time_t wall = std::time(nullptr);
    char clock[16];
    std::strftime(clock, sizeof(clock), "%H:%M:%S", std::localtime(&wall));
    std::string s = absl::StrFormat("kvserve top  %s:%s  %s  (every %gs, Ctrl-C quits)\n", host, port, clock, *interval);
    absl::StrAppendFormat(&s, "requests   running %-6.0f waiting %-6.0f finished %-8.0f rejected %.0f\n",
                          m["kvserve_num_requests_running"], m["kvserve_num_requests_waiting"],
                          m["kvserve_request_success_total"], m["kvserve_request_rejected_total"]);
    // Token counters move when a request finishes; sequences per engine step (one token each
    // in decode) is the live figure.
    absl::StrAppendFormat(&s, "tokens/s   live ~%-8.1f finished requests: prompt %.1f  generation %.1f\n",
                          rate("kvserve_step_batch_size_sum"), rate("kvserve_prompt_tokens_total"),
                          rate("kvserve_generation_tokens_total"));
    absl::StrAppendFormat(&s, "KV pages   used     %s %5.1f%%  %.0f of %.0f\n", Bar(used), 100 * used,
                          m["kvserve_kv_pages_used"], total);
    absl::StrAppendFormat(&s, "           reserved %s %5.1f%%  %.0f\n", Bar(reserved), 100 * reserved,
                          m["kvserve_kv_pages_reserved"]);
    absl::StrAppendFormat(&s, "KV bytes   used %s   peak %s   pool %s\n", Bytes(m["kvserve_kv_bytes_used"]),
                          Bytes(m["kvserve_kv_peak_bytes"]),
                          m.count("kvserve_kv_bytes_total") ? Bytes(m["kvserve_kv_bytes_total"]) : "?");
    absl::StrAppendFormat(&s, "memory     RSS %s   peak %s", Bytes(m["kvserve_process_resident_memory_bytes"]),
                          Bytes(m["kvserve_process_peak_resident_memory_bytes"]));
    if (m.count("kvserve_process_memory_limit_bytes")) {
      absl::StrAppend(&s, "   limit ", Bytes(m["kvserve_process_memory_limit_bytes"]));
    }
    if (m.count("kvserve_device_memory_free_bytes")) {
      absl::StrAppend(&s, "   device free ", Bytes(m["kvserve_device_memory_free_bytes"]));
    }
    absl::StrAppendFormat(&s, "\nlatency    TTFT %.1f ms   per token %.1f ms   e2e %.1f ms  (means since %s)\n",
                          mean("kvserve_time_to_first_token_seconds"), mean("kvserve_inter_token_latency_seconds"),
                          mean("kvserve_e2e_request_latency_seconds"), prev.empty() ? "start" : "last frame");
    std::fputs(tty ? ("\033[H\033[2J" + s).c_str() : (s + "\n").c_str(), stdout);
    std::fflush(stdout);
    prev = std::move(m);
    prev_t = now;
  }
  return 0;
}

}  // namespace kvserve::kvctl
