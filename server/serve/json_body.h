// Typed reads of an HTTP request's JSON body. A wrong type, a number out of range, a fraction
// where an integer belongs: each is an INVALID_ARGUMENT that names the field and quotes the
// value, and no read ever throws, whatever the client sent.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace kvserve {

// Parses a body that must be a JSON object; invalid JSON (invalid UTF-8 included) is
// INVALID_ARGUMENT with the parser's position, never an exception.
absl::StatusOr<nlohmann::json> ParseJsonObject(const std::string& body);

// A short quote of a value for error messages (at most ~80 bytes; a container by its size).
std::string QuoteJson(const nlohmann::json& v);

// Reads fields of one object. An absent field and a JSON null read as unset. The first error
// is kept (status()); later reads after an error return unset.
class JsonBody {
 public:
  explicit JsonBody(const nlohmann::json& object) : object_(object) {}

  const nlohmann::json* Find(const std::string& name) const;  // nullptr when absent or null
  std::optional<bool> Bool(const std::string& name);
  std::optional<double> Number(const std::string& name);  // finite
  std::optional<int64_t> Int(const std::string& name, int64_t lo, int64_t hi);
  std::optional<std::string> String(const std::string& name);
  // A string or an array of strings (OpenAI's `stop`).
  std::optional<std::vector<std::string>> Strings(const std::string& name);
  // An array of integers in [lo, hi].
  std::optional<std::vector<int64_t>> Ints(const std::string& name, int64_t lo, int64_t hi);

  void Fail(absl::Status st);
  bool ok() const { return status_.ok(); }
  const absl::Status& status() const { return status_; }

 private:
  const nlohmann::json& object_;
  absl::Status status_;
};

// `v` (a field's value, named `name` in errors) as an integer in [lo, hi]: a JSON integer, or
// a float with no fraction (2.0); 1e300 or 2.5 are errors.
absl::StatusOr<int64_t> JsonInt(const nlohmann::json& v, const std::string& name, int64_t lo, int64_t hi);

}  // namespace kvserve
