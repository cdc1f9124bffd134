// Status -> OpenAI error JSON. The HTTP status comes from the status code (and the engine's
// queue-full payload), never from the message text; only the field names in the message are
// rewritten, so a client reads the names it sent.
#include "server/serve/openai_error.h"

#include <cctype>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "engine/scheduler/request.h"
#include "nlohmann/json.hpp"

namespace kvserve {
namespace {

constexpr size_t kMaxMessageBytes = 1024;

// The field a validation message starts with: "max_tokens must be >= 1" -> "max_tokens",
// "messages[2].role 'x' is unknown" -> "messages[2].role". Empty when the first word is not a
// field path (plain prose such as "the model ...").
std::string LeadingField(const std::string& message) {
  size_t end = 0;
  bool path_chars = false;  // a field has '_', '.' or '[' or is one known word
  while (end < message.size()) {
    const char c = message[end];
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '[' || c == ']') {
      path_chars |= (c == '_' || c == '.' || c == '[');
      ++end;
    } else {
      break;
    }
  }
  std::string field = message.substr(0, end);
  while (!field.empty() && field.back() == '.') field.pop_back();
  static const char* const kOneWordFields[] = {"prompt", "messages", "model", "n", "stop", "temperature", "seed",
                                               "echo", "logprobs", "stream", "suffix", "user", "tools"};
  if (!path_chars) {
    bool known = false;
    for (const char* f : kOneWordFields) known |= field == f;
    if (!known) return "";
  }
  return field;
}

}  // namespace

OpenAiError ToOpenAiError(const absl::Status& st, const FieldRenames& renames) {
  OpenAiError e;
  e.message = std::string(st.message());
  for (const auto& [from, to] : renames) e.message = absl::StrReplaceAll(e.message, {{from, to}});
  switch (st.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      e.http_status = 400;
      e.type = "invalid_request_error";
      e.code = "invalid_value";
      e.param = LeadingField(e.message);
      break;
    case absl::StatusCode::kUnimplemented:
      e.http_status = 400;
      e.type = "invalid_request_error";
      e.code = "unsupported_parameter";
      e.param = LeadingField(e.message);
      break;
    case absl::StatusCode::kUnauthenticated:
      e.http_status = 401;
      e.type = "authentication_error";
      e.code = "invalid_api_key";
      break;
    case absl::StatusCode::kNotFound:
      e.http_status = 404;
      e.type = "invalid_request_error";
      e.code = "not_found";
      break;
    case absl::StatusCode::kResourceExhausted:
      if (IsQueueFull(st)) {
        e.http_status = 429;
        e.type = "rate_limit_error";
        e.code = "queue_full";
      } else {
        // A request the KV pool can never hold: retrying cannot help, so not a 429.
        e.http_status = 400;
        e.type = "invalid_request_error";
        e.code = "request_too_large";
      }
      break;
    case absl::StatusCode::kUnavailable:
      e.http_status = 503;
      e.type = "server_error";
      e.code = "unavailable";
      break;
    case absl::StatusCode::kCancelled:
      e.http_status = 499;  // nginx's "client closed request": nobody reads it
      e.type = "server_error";
      e.code = "cancelled";
      break;
    default:
      e.http_status = 500;
      e.type = "server_error";
      e.code = "internal_error";
      break;
  }
  return e;
}

std::string OpenAiErrorBody(const OpenAiError& e) {
  std::string message = e.message;
  if (message.size() > kMaxMessageBytes) {
    const size_t cut = message.size() - kMaxMessageBytes;
    message.resize(kMaxMessageBytes);
    absl::StrAppend(&message, "... (", cut, " more bytes)");
  }
  nlohmann::json err = {{"message", message}, {"type", e.type}, {"code", e.code}};
  err["param"] = e.param.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.param);
  // A value quoted from the request may hold invalid UTF-8 (or be cut inside a character).
  return nlohmann::json{{"error", err}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace kvserve
