// JsonBody: nlohmann-json's non-throwing parse and type checks, with messages that start with
// the field's name (ToOpenAiError takes `param` from there).
#include "server/serve/json_body.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace kvserve {
namespace {

absl::Status Bad(const std::string& name, const std::string& rule, const nlohmann::json& v) {
  return absl::InvalidArgumentError(absl::StrCat(name, " must be ", rule, ", got ", QuoteJson(v)));
}

}  // namespace

absl::StatusOr<nlohmann::json> ParseJsonObject(const std::string& body) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(body);
  } catch (const nlohmann::json::exception& e) {
    // A syntax error, invalid UTF-8, or a number past a double's range (1e400). e.what()
    // names the byte offset and what was expected; it never quotes the whole body.
    return absl::InvalidArgumentError(absl::StrCat("the body is not valid JSON: ", e.what()));
  }
  if (!j.is_object()) return absl::InvalidArgumentError("the body must be a JSON object");
  return j;
}

std::string QuoteJson(const nlohmann::json& v) {
  constexpr size_t kMax = 80;
  // Never dump a container: dump() recurses, and a client's 100,000-deep array would overflow
  // the worker's stack.
  if (v.is_array()) return absl::StrCat("an array of ", v.size());
  if (v.is_object()) return absl::StrCat("an object of ", v.size(), " fields");
  std::string s = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > kMax) s = absl::StrCat(s.substr(0, kMax), "...");
  return s;
}

absl::StatusOr<int64_t> JsonInt(const nlohmann::json& v, const std::string& name, int64_t lo, int64_t hi) {
  const std::string rule = absl::StrCat("an integer in [", lo, ", ", hi, "]");
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX) || static_cast<int64_t>(u) > hi || static_cast<int64_t>(u) < lo) {
      return Bad(name, rule, v);
    }
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    if (i < lo || i > hi) return Bad(name, rule, v);
    return i;
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    // Compared as doubles first, so 1e300 never reaches the cast.
    if (!std::isfinite(d) || d != std::floor(d) || d < static_cast<double>(lo) || d > static_cast<double>(hi)) {
      return Bad(name, rule, v);
    }
    return static_cast<int64_t>(d);
  }
  return Bad(name, rule, v);
}

const nlohmann::json* JsonBody::Find(const std::string& name) const {
  auto it = object_.find(name);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

void JsonBody::Fail(absl::Status st) {
  if (status_.ok()) status_ = std::move(st);
}

std::optional<bool> JsonBody::Bool(const std::string& name) {
  const nlohmann::json* v = ok() ? Find(name) : nullptr;
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) {
    Fail(Bad(name, "true or false", *v));
    return std::nullopt;
  }
  return v->get<bool>();
}

std::optional<double> JsonBody::Number(const std::string& name) {
  const nlohmann::json* v = ok() ? Find(name) : nullptr;
  if (v == nullptr) return std::nullopt;
  if (!v->is_number() || !std::isfinite(v->get<double>())) {
    Fail(Bad(name, "a finite number", *v));
    return std::nullopt;
  }
  return v->get<double>();
}

std::optional<int64_t> JsonBody::Int(const std::string& name, int64_t lo, int64_t hi) {
  const nlohmann::json* v = ok() ? Find(name) : nullptr;
  if (v == nullptr) return std::nullopt;
  absl::StatusOr<int64_t> i = JsonInt(*v, name, lo, hi);
  if (!i.ok()) {
    Fail(i.status());
    return std::nullopt;
  }
  return *i;
}

std::optional<std::string> JsonBody::String(const std::string& name) {
  const nlohmann::json* v = ok() ? Find(name) : nullptr;
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) {
    Fail(Bad(name, "a string", *v));
    return std::nullopt;
  }
  return v->get<std::string>();
}

std::optional<std::vector<std::string>> JsonBody::Strings(const std::string& name) {
  const nlohmann::json* v = ok() ? Find(name) : nullptr;
  if (v == nullptr) return std::nullopt;
  if (v->is_string()) return std::vector<std::string>{v->get<std::string>()};
  if (!v->is_array()) {
    Fail(Bad(name, "a string or an array of strings", *v));
    return std::nullopt;
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string()) {
      Fail(Bad(absl::StrCat(name, "[", i, "]"), "a string", (*v)[i]));
      return std::nullopt;
    }
    out.push_back((*v)[i].get<std::string>());
  }
  return out;
}

std::optional<std::vector<int64_t>> JsonBody::Ints(const std::string& name, int64_t lo, int64_t hi) {
  const nlohmann::json* v = ok() ? Find(name) : nullptr;
  if (v == nullptr) return std::nullopt;
  if (!v->is_array()) {
    Fail(Bad(name, "an array of integers", *v));
    return std::nullopt;
  }
  std::vector<int64_t> out;
  for (size_t i = 0; i < v->size(); ++i) {
    absl::StatusOr<int64_t> x = JsonInt((*v)[i], absl::StrCat(name, "[", i, "]"), lo, hi);
    if (!x.ok()) {
      Fail(x.status());
      return std::nullopt;
    }
    out.push_back(*x);
  }
  return out;
}

}  // namespace kvserve
