// An OpenAI /v1/completions or /v1/chat/completions body mapped onto the gRPC API's
// GenerateRequest, so the one validation path (BuildEngineRequests) checks both APIs. What the
// proto has no field for (n, stream, echo, the shape of logprobs) is kept beside it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "kvserve/v1/generation.pb.h"
#include "nlohmann/json.hpp"
#include "server/serve/openai_error.h"

namespace kvserve {

enum class OpenAiEndpoint { kCompletions, kChatCompletions };

struct OpenAiRequest {
  OpenAiEndpoint endpoint = OpenAiEndpoint::kCompletions;
  // Each distinct prompt once; the server runs it n times (choices p*n .. p*n+n-1, OpenAI's
  // order), so the proto's prompt indices are the body's.
  v1::GenerateRequest proto;
  int64_t prompts = 1;  // distinct prompts (a completion may send a list)
  int64_t n = 1;        // choices per prompt
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with the usage
  // Completions: each choice's text starts with its prompt; with logprobs, so do its
  // logprobs (the prompt's tokens, the first with a null logprob: proto.logprobs.prompt_logprobs).
  bool echo = false;
  // Alternatives per token to report; -1: no logprobs. The engine is asked for at least one,
  // since it reports a token's own logprob only with its alternatives.
  int32_t top_logprobs = -1;
  std::optional<uint64_t> seed;       // unset: each call draws one (OpenAI's unseeded sampling)
  std::string max_tokens_field = "max_tokens";  // as the client spelled it, for errors
};

// Checks types and OpenAI-only rules; value ranges the gRPC API also has are left to
// BuildEngineRequests. `max_choices` is --max-prompts-per-call. Known fields kvserve cannot
// honour (suffix, logit_bias, tools, ...) are UNIMPLEMENTED naming the
// field; unknown fields are ignored, as OpenAI and vLLM do.
absl::StatusOr<OpenAiRequest> ParseOpenAiRequest(const nlohmann::json& body, OpenAiEndpoint endpoint,
                                                 int64_t max_choices);

// A body's `messages` (role and content; content a string or an array of text parts) as chat
// messages of `out`. Roles are checked by RenderMessages (the gRPC path), except OpenAI's newer
// "developer", which becomes the system turn.
absl::Status ReadOpenAiMessages(const nlohmann::json& body, v1::Prompt* out);

// The proto's field names as this request's body spells them (for BuildEngineRequests' errors).
FieldRenames OpenAiFieldRenames(const OpenAiRequest& r);

}  // namespace kvserve
