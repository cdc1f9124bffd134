// ReplyJson / ReplyError over httplib::Response.
#include "server/serve/http_json_reply.h"

#include "httplib.h"
#include "server/serve/openai_response.h"

namespace kvserve {

void ReplyJson(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(DumpJson(body) + "\n", "application/json");
}

void ReplyError(httplib::Response& res, const absl::Status& st, const FieldRenames& renames) {
  const OpenAiError e = ToOpenAiError(st, renames);
  res.status = e.http_status;
  // Backpressure and a loading or draining server are worth a retry (the openai SDK honours it).
  if (e.http_status == 429 || e.http_status == 503) res.set_header("Retry-After", "1");
  res.set_content(OpenAiErrorBody(e), "application/json");
}

absl::Status LoadingError() { return absl::UnavailableError("the model is still loading; retry shortly"); }

std::string ServedModelName(const ServeContext& ctx) {
  const std::string& source = ctx.model.source;
  const size_t slash = source.find_last_of('/');
  if (slash == std::string::npos || slash + 1 == source.size()) return source;
  return source.substr(slash + 1);
}

}  // namespace kvserve
