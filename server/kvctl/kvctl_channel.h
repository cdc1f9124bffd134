// kvctl's connection flags (--addr, --deadline, TLS) and the channel they describe.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "server/flags/cli_args.h"

namespace kvserve::kvctl {

// Flags every command takes.
const std::vector<std::string>& ConnectionFlags();        // value flags
const std::vector<std::string>& ConnectionBoolFlags();    // --tls
extern const char kConnectionUsage[];

struct Connection {
  std::shared_ptr<grpc::Channel> channel;
  double deadline_seconds = 0;  // 0 = none
  std::string api_key;          // --api-key-file's first token or $KVSERVE_API_KEY; empty = none
  // A context carrying the deadline and, with an API key, `authorization: Bearer KEY`.
  std::unique_ptr<grpc::ClientContext> NewContext() const;
};

absl::StatusOr<Connection> Connect(const CliArgs& args);

// "kvctl: DEADLINE_EXCEEDED: ..." on stderr; returns the exit status 1.
int ReportRpcError(const grpc::Status& st);
int ReportError(const absl::Status& st);

}  // namespace kvserve::kvctl
