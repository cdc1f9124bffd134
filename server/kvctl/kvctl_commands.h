// kvctl's subcommands; each returns the process exit status (0 ok, 1 error, 2 usage).
#pragma once
#include "absl/status/statusor.h"
#include "kvserve/v1/generation.pb.h"
#include "server/flags/cli_args.h"

namespace kvserve::kvctl {

int RunGenerate(int argc, char** argv);
int RunTokenize(int argc, char** argv);
int RunInfo(int argc, char** argv);
int RunHealth(int argc, char** argv);
int RunBench(int argc, char** argv);
int RunTop(int argc, char** argv);  // kvctl_top.cc: a terminal view of /metrics

// The generate flags (also used by bench) and the request they describe.
const std::vector<std::string>& GenerateFlags();
const std::vector<std::string>& GenerateBoolFlags();
extern const char kGenerateUsage[];
absl::StatusOr<v1::GenerateRequest> BuildGenerateRequest(const CliArgs& args);

// Parses with the connection flags added to the command's own.
// `usage` heads --help, followed by every flag.
absl::StatusOr<CliArgs> ParseWithConnection(int argc, char** argv, std::vector<std::string> value_flags,
                                            std::vector<std::string> bool_flags, const std::string& usage);

}  // namespace kvserve::kvctl
