// ServerProcess: fork/exec of `kvserve serve`, port discovery through --port-file, and a
// minimal HTTP/1.0 client for /metrics (no HTTP library needed in the test image).
#include "tests/server/serve/server_process.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"

namespace kvserve::testing {

std::string BinaryPath(const std::string& name) { return std::string(KVSERVE_BINARY_DIR) + "/" + name; }

bool WaitFor(const std::function<bool()>& pred, std::chrono::duration<double> timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

std::unique_ptr<ServerProcess> ServerProcess::Start(const std::vector<std::string>& extra) {
  auto s = std::unique_ptr<ServerProcess>(new ServerProcess());
  char tmpl[] = "/tmp/kvserve-test-XXXXXX";
  s->dir_ = mkdtemp(tmpl);
  const std::string port_file = s->dir_ + "/ports";
  std::vector<std::string> args = {BinaryPath("kvserve"), "serve", "--model", "random:tiny", "--host", "127.0.0.1",
                                   "--port", "0", "--metrics-host", "127.0.0.1", "--metrics-port", "0",
                                   "--port-file", port_file, "--kv-memory", "256M"};
  args.insert(args.end(), extra.begin(), extra.end());
  const std::string log = s->dir_ + "/stderr";
  s->pid_ = fork();
  if (s->pid_ == 0) {
    FILE* f = std::fopen(log.c_str(), "w");
    if (f) dup2(fileno(f), 2);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  bool exited = false;
  const bool ports = WaitFor(
      [&] {
        // A server that failed at start-up (bad flag, port in use) ends the wait at once.
        if (waitpid(s->pid_, nullptr, WNOHANG) == s->pid_) {
          exited = s->exited_ = true;
          return true;
        }
        std::ifstream in(port_file);
        std::string line;
        while (std::getline(in, line)) {
          if (line.rfind("grpc=", 0) == 0) s->grpc_port_ = std::stoi(line.substr(5));
          if (line.rfind("metrics=", 0) == 0) s->metrics_port_ = std::stoi(line.substr(8));
          if (line.rfind("http=", 0) == 0) s->http_port_ = std::stoi(line.substr(5));
        }
        return s->grpc_port_ > 0;
      },
      std::chrono::seconds(120));
  if (!ports || exited || !WaitFor([&] { return s->Health() == "SERVING"; }, std::chrono::seconds(120))) {
    ADD_FAILURE() << "kvserve serve did not become SERVING; its log:\n" << s->Log();
    return nullptr;
  }
  return s;
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0 && !exited_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (!dir_.empty()) std::system(("rm -rf '" + dir_ + "'").c_str());
}

std::shared_ptr<grpc::Channel> ServerProcess::Channel() const {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  // A distinct argument per channel gives each its own connection, like separate clients.
  static std::atomic<int> n{0};
  args.SetInt("kvserve.test.channel", n++);
  return grpc::CreateCustomChannel(address(), grpc::InsecureChannelCredentials(), args);
}

std::string ServerProcess::Health() const {
  auto stub = grpc::health::v1::Health::NewStub(Channel());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::health::v1::HealthCheckRequest req;
  grpc::health::v1::HealthCheckResponse resp;
  grpc::Status st = stub->Check(&ctx, req, &resp);
  if (!st.ok()) return "RPC error " + std::to_string(st.error_code()) + ": " + st.error_message();
  return grpc::health::v1::HealthCheckResponse::ServingStatus_Name(resp.status());
}

std::string ServerProcess::Metrics() const { return HttpGet(metrics_port_, "/metrics"); }

std::optional<double> ServerProcess::Metric(const std::string& key) const {
  std::istringstream in(Metrics());
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key + " ", 0) == 0) return std::stod(line.substr(key.size() + 1));
  }
  return std::nullopt;
}

int ServerProcess::Wait(std::chrono::duration<double> timeout) {
  int status = 0;
  const bool done = WaitFor([&] { return waitpid(pid_, &status, WNOHANG) == pid_; }, timeout);
  if (!done) return -1;
  exited_ = true;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int ServerProcess::Terminate(std::chrono::duration<double> timeout) {
  kill(pid_, SIGTERM);
  return Wait(timeout);
}

std::string ServerProcess::Log() const {
  std::ifstream in(dir_ + "/stderr");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string req = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (write(fd, req.data(), req.size()) == static_cast<ssize_t>(req.size())) {
      char buf[65536];
      for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) out.append(buf, n);
    }
  }
  close(fd);
  const size_t body = out.find("\r\n\r\n");
  return body == std::string::npos ? "" : out.substr(body + 4);
}

grpc::Status CallUnary(const ServerProcess& s, const v1::GenerateRequest& r, v1::GenerateResponse* resp) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::GenerateResponse ignored;
  return v1::Generation::NewStub(s.Channel())->Generate(&ctx, r, resp ? resp : &ignored);
}

std::string RunCommand(const std::string& command) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
  pclose(p);
  return out;
}

}  // namespace kvserve::testing
