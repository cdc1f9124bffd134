// Command-line flags of the kvserve and kvctl commands, parsed with CLI11: --name value,
// --name=value, bare booleans, --help; errors name the offending flag or value.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kvserve {

class CliArgs {
 public:
  // argv[0] names the command ("generate"); value_flags take a value, bool_flags do not. A
  // name "kv-policy|policy" also accepts --policy, read back as "kv-policy". Any other --flag
  // is an error naming it. --help or -h prints `usage` and every flag the command takes, with
  // its meaning from server/flags/flag_help.h, to stdout, and sets help().
  static absl::StatusOr<CliArgs> Parse(int argc, char** argv, const std::vector<std::string>& value_flags,
                                       const std::vector<std::string>& bool_flags, std::string_view usage = "");

  // --help was given: the help is printed, the command should exit 0.
  bool help() const { return help_; }
  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  bool Flag(const std::string& name) const { return Has(name); }
  // The last value given for a flag.
  std::optional<std::string> Get(const std::string& name) const;
  // Every value given for a repeatable flag, in order.
  std::vector<std::string> GetAll(const std::string& name) const;
  // Typed getters: the default when absent, an error naming flag and value when malformed.
  absl::StatusOr<int64_t> GetInt(const std::string& name, int64_t def) const;
  absl::StatusOr<double> GetDouble(const std::string& name, double def) const;

 private:
  std::map<std::string, std::vector<std::string>> values_;
  bool help_ = false;
};

// The whole file a flag names (--prompt-file F); NOT_FOUND naming flag and path when it
// cannot be read.
absl::StatusOr<std::string> ReadFlagFile(const std::string& flag, const std::string& path);

}  // namespace kvserve
