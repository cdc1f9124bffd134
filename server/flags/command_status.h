// How a kvserve command reports a failed step: the message on stderr after the command's name,
// and exit status 1. Each command file binds its name once:
//   int Fail(const absl::Status& st) { return ReportFailure("kvserve bench", st); }
// and KV_ASSIGN_OR_FAIL then returns Fail(status) from the calling function.
#pragma once
#include <cstdio>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace kvserve {

// "<command>: <message>" on stderr; returns 1, the exit status of a failed command.
inline int ReportFailure(std::string_view command, const absl::Status& st) {
  std::fprintf(stderr, "%.*s: %s\n", static_cast<int>(command.size()), command.data(),
               std::string(st.message()).c_str());
  return 1;
}

}  // namespace kvserve

// KV_ASSIGN_OR_FAIL(lhs, expr): `lhs` names the value of `expr` (an absl::StatusOr), or the
// enclosing function returns Fail(its status).
#define KV_ASSIGN_OR_FAIL(lhs, expr)                  \
  auto lhs##_or = (expr);                             \
  if (!lhs##_or.ok()) return Fail(lhs##_or.status()); \
  auto& lhs = *lhs##_or
