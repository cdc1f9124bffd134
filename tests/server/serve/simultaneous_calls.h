// Many clients calling at the same instant: how a listen backlog too narrow for a burst shows
// (dropped SYNs the kernel retries after 1 s). Shared by the HTTP API's and the metrics port's
// tests.
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

namespace kvserve::testing {

// Starts `clients` threads that each make `call` at the same instant; returns the slowest
// call's seconds (a failed call counts as 1e9), the best over `bursts` bursts so that one
// stall on a busy machine is not a failure.
inline double SlowestOfSimultaneousCalls(int clients, int bursts, const std::function<bool()>& call) {
  double best_slowest = 1e9;
  for (int burst = 0; burst < bursts; ++burst) {
    std::vector<std::thread> threads;
    std::vector<double> seconds(static_cast<size_t>(clients), 1e9);
    std::atomic<bool> go{false};
    for (int i = 0; i < clients; ++i) {
      threads.emplace_back([&, i] {
        while (!go.load()) std::this_thread::yield();
        const auto t0 = std::chrono::steady_clock::now();
        if (call()) seconds[static_cast<size_t>(i)] =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      });
    }
    go.store(true);
    for (std::thread& t : threads) t.join();
    best_slowest = std::min(best_slowest, *std::max_element(seconds.begin(), seconds.end()));
  }
  return best_slowest;
}

}  // namespace kvserve::testing
