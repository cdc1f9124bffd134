// Test harness: runs `kvserve serve` on the tiny random model as a child process on
// loopback with OS-chosen ports, and reads its /metrics. Each test starts its own server,
// so tests stay independent under `ctest -j`.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "kvserve/v1/generation.grpc.pb.h"

namespace kvserve::testing {

std::string BinaryPath(const std::string& name);  // a binary of this build tree

class ServerProcess {
 public:
  // Starts kvserve serve --model random:tiny with `extra` flags and waits (up to 120 s,
  // generous for loaded CI machines) until its health check says SERVING. Fails the
  // test (ADD_FAILURE) and returns nullptr otherwise.
  static std::unique_ptr<ServerProcess> Start(const std::vector<std::string>& extra = {});
  ~ServerProcess();  // SIGKILL if still running

  std::string address() const { return "127.0.0.1:" + std::to_string(grpc_port_); }
  int metrics_port() const { return metrics_port_; }
  int http_port() const { return http_port_; }  // -1 unless started with --http-port
  pid_t pid() const { return pid_; }
  // A fresh channel without message size limits on the client side.
  std::shared_ptr<grpc::Channel> Channel() const;
  // The health status of the whole server: "SERVING", "NOT_SERVING", or the RPC error.
  std::string Health() const;
  // The exposition text of /metrics ("" when it cannot be read).
  std::string Metrics() const;
  // The value of an unlabelled sample (or of one exact `name{labels}` key) in /metrics.
  std::optional<double> Metric(const std::string& key) const;
  // Sends SIGTERM; returns the exit status, or -1 if it did not exit within `timeout`.
  int Terminate(std::chrono::duration<double> timeout);
  // Waits for exit without signalling; -1 on timeout.
  int Wait(std::chrono::duration<double> timeout);
  // The server's stderr so far (for failure messages).
  std::string Log() const;

 private:
  pid_t pid_ = -1;
  int grpc_port_ = 0;
  int metrics_port_ = 0;
  int http_port_ = -1;
  std::string dir_;
  bool exited_ = false;
};

// One unary Generate on the server with a 60 s deadline; the response into *resp when given.
grpc::Status CallUnary(const ServerProcess& s, const v1::GenerateRequest& r, v1::GenerateResponse* resp = nullptr);

// GET http://127.0.0.1:port/path; the body, or "" on any error.
std::string HttpGet(int port, const std::string& path);

// Runs a shell command and returns its stdout.
std::string RunCommand(const std::string& command);

// Polls `pred` every 50 ms until it is true or `timeout` passes.
bool WaitFor(const std::function<bool()>& pred, std::chrono::duration<double> timeout);

}  // namespace kvserve::testing
