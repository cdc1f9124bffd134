// Generate (unary): every prompt of the call is submitted to the engine at once, so they
// share the continuous batch; the call finishes when the last one does.
#pragma once
#include "grpcpp/grpcpp.h"
#include "kvserve/v1/generation.pb.h"
#include "server/serve/grpc_serve_context.h"

namespace kvserve {

// Validates, submits and returns the reactor (which deletes itself in OnDone).
grpc::ServerUnaryReactor* StartGenerate(const ServeContext& ctx, grpc::CallbackServerContext* call,
                                        const v1::GenerateRequest& request, v1::GenerateResponse* response);

}  // namespace kvserve
