// Parsing of command-line flags with CLI11, with errors that name the offending flag or value.
#include "server/flags/cli_args.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <fstream>
#include <iterator>
#include <iostream>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "server/flags/flag_help.h"

namespace kvserve {
namespace {

// A flag's names: the first is the one values are read back under, the rest are aliases.
using FlagNames = std::vector<std::string>;

std::vector<FlagNames> SplitNames(const std::vector<std::string>& specs) {
  std::vector<FlagNames> out;
  for (const std::string& spec : specs) {
    if (spec != "help") out.push_back(absl::StrSplit(spec, '|'));  // --help is CLI11's own
  }
  return out;
}

const FlagNames* Find(const std::vector<FlagNames>& flags, std::string_view name) {
  for (const FlagNames& f : flags) {
    if (std::find(f.begin(), f.end(), name) != f.end()) return &f;
  }
  return nullptr;
}

std::string OptionNames(const FlagNames& f) {
  return absl::StrJoin(f, ",", [](std::string* out, const std::string& n) { absl::StrAppend(out, "--", n); });
}

// CLI11 reads "--name value" as a flag when the value starts with '-' and reads "--name=" as
// a flag waiting for the next word, so each value is joined to its flag first ("--name=value",
// or "--name" "" when empty), and aliases become the flag's first name.
absl::StatusOr<std::vector<std::string>> JoinValues(int argc, char** argv, const std::vector<FlagNames>& values,
                                                    const std::vector<FlagNames>& bools) {
  std::vector<std::string> out;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--", 0) != 0 || a == "--") {
      out.push_back(a);
      continue;
    }
    const size_t eq = a.find('=');
    const std::string name = a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    if (const FlagNames* f = Find(bools, name)) {
      if (eq != std::string::npos) return absl::InvalidArgumentError(absl::StrCat("flag --", name, " takes no value"));
      out.push_back("--" + f->front());
    } else if (const FlagNames* f = Find(values, name)) {
      std::string value;
      if (eq != std::string::npos) {
        value = a.substr(eq + 1);
      } else {
        if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat("flag --", name, " needs a value"));
        value = argv[++i];
      }
      if (value.empty()) {
        out.push_back("--" + f->front());
        out.push_back("");
      } else {
        out.push_back(absl::StrCat("--", f->front(), "=", value));
      }
    } else {
      out.push_back(a);  // --help, or an unknown flag CLI11 reports
    }
  }
  return out;
}

// CLI11's "not expected" error in this project's words: the first unknown flag, by name.
absl::Status UnexpectedError(const std::vector<std::string>& remaining) {
  for (const std::string& r : remaining) {
    if (r.size() > 1 && r[0] == '-') {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag ", r.substr(0, r.find('='))));
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unexpected argument '", remaining.empty() ? "" : remaining.front(), "'"));
}

}  // namespace

absl::StatusOr<CliArgs> CliArgs::Parse(int argc, char** argv, const std::vector<std::string>& value_flags,
                                       const std::vector<std::string>& bool_flags, std::string_view usage) {
  const std::vector<FlagNames> values = SplitNames(value_flags), bools = SplitNames(bool_flags);
  absl::StatusOr<std::vector<std::string>> joined = JoinValues(argc, argv, values, bools);
  if (!joined.ok()) return joined.status();

  CLI::App app(std::string(usage), argc > 0 ? argv[0] : "");
  std::map<std::string, std::unique_ptr<std::vector<std::string>>> given;
  std::map<std::string, CLI::Option*> options;
  for (const FlagNames& f : values) {
    const FlagHelp h = HelpOf(f.front());
    auto& store = given[f.front()] = std::make_unique<std::vector<std::string>>();
    options[f.front()] = app.add_option(OptionNames(f), *store, std::string(h.help))
                             ->type_name(std::string(h.value.empty() ? "VALUE" : h.value))
                             ->expected(1)
                             ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  }
  for (const FlagNames& f : bools) {
    options[f.front()] = app.add_flag(OptionNames(f))->description(std::string(HelpOf(f.front()).help));
  }

  CliArgs args;
  std::vector<std::string> reversed(joined->rbegin(), joined->rend());  // CLI11 pops from the back
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    args.help_ = true;
    return args;
  } catch (const CLI::ExtrasError&) {
    return UnexpectedError(app.remaining());
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(e.what());
  }
  for (const auto& [name, option] : options) {
    if (option->count() == 0) continue;
    auto it = given.find(name);
    if (it == given.end()) {
      args.values_[name].push_back("true");
    } else {
      args.values_[name] = it->second->empty() ? std::vector<std::string>{""} : *it->second;
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

absl::StatusOr<std::string> ReadFlagFile(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("--", flag, " '", path, "' cannot be read"));
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace kvserve
