// GenerateStream: one ServerWriteReactor per call, with one write in flight. The engine's
// sink only queues output and, when no write is in flight, starts the next one; it never
// blocks on the network.
#pragma once
#include "grpcpp/grpcpp.h"
#include "kvserve/v1/generation.pb.h"
#include "server/serve/grpc_serve_context.h"

namespace kvserve {

// Validates, submits and returns the reactor (which deletes itself in OnDone).
grpc::ServerWriteReactor<v1::GenerateStreamResponse>* StartGenerateStream(const ServeContext& ctx,
                                                                          grpc::CallbackServerContext* call,
                                                                          const v1::GenerateRequest& request);

}  // namespace kvserve
