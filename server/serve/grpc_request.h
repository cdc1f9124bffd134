// Turning a GenerateRequest into engine requests: tokenizing or rendering each prompt and
// checking every field, with errors that name the field and the value.
#pragma once
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/scheduler/request.h"
#include "grpcpp/support/status.h"
#include "kvserve/v1/generation.pb.h"
#include "server/serve/grpc_serve_context.h"

namespace kvserve {

// One EngineRequest per prompt (sinks unset). INVALID_ARGUMENT names the field and value;
// (Logprobs: top_logprobs > 0 makes every generated token carry its log-probability and
// the top-n alternatives.)
absl::StatusOr<std::vector<EngineRequest>> BuildEngineRequests(const ServeContext& ctx,
                                                               const v1::GenerateRequest& req, bool streaming);

// Renders chat messages with the model's template; `field` prefixes error messages.
absl::StatusOr<std::string> RenderMessages(const ServeContext& ctx,
                                           const google::protobuf::RepeatedPtrField<v1::ChatMessage>& messages,
                                           const std::string& field);

// absl and gRPC share their status code numbering.
grpc::Status ToGrpcStatus(const absl::Status& st);
// The kvserve_request_rejected_total reason for a status that refused a call.
const char* RejectReason(const absl::Status& st);

}  // namespace kvserve
