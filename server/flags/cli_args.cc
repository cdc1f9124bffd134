// Parsing of subcommand flags with errors that name the offending flag or value.
#include "server/flags/cli_args.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kvserve {

absl::StatusOr<CliArgs> CliArgs::Parse(int argc, char** argv, const std::vector<std::string>& value_flags,
                                       const std::vector<std::string>& bool_flags) {
  CliArgs args;
  auto is = [](const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", a, "'"));
    std::string name = a.substr(2), value;
    bool has_value = false;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    if (is(bool_flags, name)) {
      if (has_value) return absl::InvalidArgumentError(absl::StrCat("flag --", name, " takes no value"));
      args.values_[name].push_back("true");
    } else if (is(value_flags, name)) {
      if (!has_value) {
        if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat("flag --", name, " needs a value"));
        value = argv[++i];
      }
      args.values_[name].push_back(value);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
  }
  return args;
}

std::optional<std::string> CliArgs::Get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> CliArgs::GetAll(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

absl::StatusOr<int64_t> CliArgs::GetInt(const std::string& name, int64_t def) const {
  auto v = Get(name);
  if (!v) return def;
  int64_t out;
  if (!absl::SimpleAtoi(*v, &out)) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " must be an integer, got '", *v, "'"));
  }
  return out;
}

absl::StatusOr<double> CliArgs::GetDouble(const std::string& name, double def) const {
  auto v = Get(name);
  if (!v) return def;
  double out;
  if (!absl::SimpleAtod(*v, &out)) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " must be a number, got '", *v, "'"));
  }
  return out;
}

}  // namespace kvserve
