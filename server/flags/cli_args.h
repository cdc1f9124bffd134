// Command-line flags of the kvserve subcommands: --name value, --name=value, bare booleans.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kvserve {

class CliArgs {
 public:
  // value_flags take a value; bool_flags do not. Any other --flag is an error naming it.
  static absl::StatusOr<CliArgs> Parse(int argc, char** argv, const std::vector<std::string>& value_flags,
                                       const std::vector<std::string>& bool_flags);

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
};

}  // namespace kvserve
