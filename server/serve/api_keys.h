// Bearer-token authentication for the gRPC API (`--api-key-file`): the tokens a client may
// send as `authorization: Bearer TOKEN` metadata. Compared in constant time, so response
// timing does not reveal how much of a guess was right.
#pragma once
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/support/string_ref.h"

namespace kvserve {

class ApiKeys {
 public:
  // One token per line; blank lines and lines starting with '#' are skipped. NOT_FOUND when
  // the file cannot be read, INVALID_ARGUMENT (naming the flag, never a token) when it holds
  // none or one is shorter than 16 bytes.
  static absl::StatusOr<ApiKeys> Load(const std::string& path);
  static ApiKeys FromTokens(std::vector<std::string> tokens) { return ApiKeys(std::move(tokens)); }

  // True when the metadata's authorization value is "Bearer T" for a known token T.
  bool Allows(const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) const;
  bool Allows(std::string_view authorization) const;

 private:
  explicit ApiKeys(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {}
  std::vector<std::string> tokens_;
};

}  // namespace kvserve
