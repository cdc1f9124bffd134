#include "server/serve/api_keys.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace kvserve {
namespace {

constexpr size_t kMinTokenBytes = 16;

// Equal in time for every candidate of the same length as `token`; a length mismatch is
// folded into the result rather than returned early.
bool ConstantTimeEquals(std::string_view given, std::string_view token) {
  unsigned char diff = given.size() == token.size() ? 0 : 1;
  for (size_t i = 0; i < token.size(); ++i) {
    const unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff |= static_cast<unsigned char>(g ^ static_cast<unsigned char>(token[i]));
  }
  return diff == 0;
}

}  // namespace

absl::StatusOr<ApiKeys> ApiKeys::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("--api-key-file '", path, "' cannot be read"));
  std::vector<std::string> tokens;
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    const absl::string_view t = absl::StripAsciiWhitespace(line);
    if (t.empty() || t.front() == '#') continue;
    if (t.size() < kMinTokenBytes) {
      return absl::InvalidArgumentError(absl::StrCat("--api-key-file '", path, "' line ", line_no, ": a token needs at least ",
                                                     kMinTokenBytes, " bytes"));
    }
    tokens.emplace_back(t.data(), t.size());
  }
  if (tokens.empty()) return absl::InvalidArgumentError(absl::StrCat("--api-key-file '", path, "' holds no token"));
  return ApiKeys(std::move(tokens));
}

bool ApiKeys::Allows(std::string_view authorization) const {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.substr(0, kBearer.size()) != kBearer) return false;
  const std::string_view given = authorization.substr(kBearer.size());
  bool ok = false;
  for (const std::string& t : tokens_) ok |= ConstantTimeEquals(given, t);  // no early exit
  return ok;
}

bool ApiKeys::Allows(const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) const {
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return false;
  return Allows(std::string_view(it->second.data(), it->second.size()));
}

}  // namespace kvserve
