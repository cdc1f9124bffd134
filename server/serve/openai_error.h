// OpenAI-shaped errors for the HTTP API: {"error": {"message", "type", "param", "code"}} with
// the HTTP status a client of OpenAI (or vLLM) expects, made from the same absl::Status the
// gRPC API turns into a status code, so both APIs refuse the same requests the same way.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace kvserve {

struct OpenAiError {
  int http_status = 500;
  std::string type;     // "invalid_request_error", "authentication_error", ...
  std::string code;     // machine-readable: "invalid_value", "queue_full", ...
  std::string param;    // the request field at fault ("" when none)
  std::string message;  // names the field and the value, as the gRPC message does
};

// Renames in a message: the proto's field names (what BuildEngineRequests says) to what an
// OpenAI body calls them, e.g. {"stopping.max_new_tokens", "max_tokens"}.
using FieldRenames = std::vector<std::pair<std::string, std::string>>;

// INVALID_ARGUMENT -> 400, UNAUTHENTICATED -> 401, NOT_FOUND -> 404, RESOURCE_EXHAUSTED -> 429
// when the engine marked it queue-full (the same request may fit later) else 400 (it never
// fits), UNAVAILABLE -> 503, the rest -> 500. For 400s `param` is the field the message
// starts with (every validation message in kvserve does), after `renames`.
OpenAiError ToOpenAiError(const absl::Status& st, const FieldRenames& renames = {});

// The response body; messages are capped at 1 KiB as the gRPC ones are, so a 100 KB bad value
// is not echoed back whole.
std::string OpenAiErrorBody(const OpenAiError& e);

}  // namespace kvserve
