// Small helpers every HTTP API route answers with: a JSON body, an OpenAI-shaped error, the
// served model's name.
#pragma once
#include <string>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "server/serve/grpc_serve_context.h"
#include "server/serve/openai_error.h"

namespace httplib {
struct Response;
}  // namespace httplib

namespace kvserve {

void ReplyJson(httplib::Response& res, int status, const nlohmann::json& body);
// The status as an OpenAI error (ToOpenAiError), with its HTTP status.
void ReplyError(httplib::Response& res, const absl::Status& st, const FieldRenames& renames = {});

// UNAVAILABLE: what every model route answers before the model has loaded.
absl::Status LoadingError();

// What /v1/models lists and responses carry as "model": --model's file name (a path's last
// part; "random:tiny:0" for a random preset, as the loader names it). Requests may name any model: this server serves one.
std::string ServedModelName(const ServeContext& ctx);

}  // namespace kvserve
