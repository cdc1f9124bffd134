// What each command-line flag means, in one table, so a flag reads the same in every command
// of kvserve and kvctl that takes it (`--help` prints these lines).
#pragma once
#include <string_view>

namespace kvserve {

struct FlagHelp {
  std::string_view value;  // the value's placeholder in --help ("N", "PATH"); empty for a bare flag
  std::string_view help;   // one line: what the flag does, with its default where it has one
};

// The help of flag `name` (without "--"); an empty FlagHelp for a name the table lacks.
FlagHelp HelpOf(std::string_view name);

}  // namespace kvserve
