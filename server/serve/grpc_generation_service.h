// The kvserve.v1.Generation service on the gRPC callback API. It exists before the model
// has loaded (so health and reflection answer during the load); until set_context is
// called, every method answers UNAVAILABLE.
#pragma once
#include <atomic>

#include "kvserve/v1/generation.grpc.pb.h"
#include "prometheus/counter.h"
#include "server/serve/api_keys.h"
#include "server/serve/grpc_serve_context.h"

namespace kvserve {

class GenerationService final : public v1::Generation::CallbackService {
 public:
  void set_context(const ServeContext* ctx) { ctx_.store(ctx); }
  // With keys, every method answers UNAUTHENTICATED (no detail) to a call without a valid
  // `authorization: Bearer` token and counts it in `failures`. Set before the server starts;
  // both outlive the service. grpc.health.v1 is a separate service and stays open.
  void set_api_keys(const ApiKeys* keys, prometheus::Counter* failures) {
    api_keys_ = keys;
    auth_failures_ = failures;
  }

  grpc::ServerUnaryReactor* Generate(grpc::CallbackServerContext* call, const v1::GenerateRequest* request,
                                     v1::GenerateResponse* response) override;
  grpc::ServerWriteReactor<v1::GenerateStreamResponse>* GenerateStream(grpc::CallbackServerContext* call,
                                                                       const v1::GenerateRequest* request) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* call, const v1::TokenizeRequest* request,
                                     v1::TokenizeResponse* response) override;
  grpc::ServerUnaryReactor* Detokenize(grpc::CallbackServerContext* call, const v1::DetokenizeRequest* request,
                                       v1::DetokenizeResponse* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* call, const v1::GetModelInfoRequest* request,
                                         v1::GetModelInfoResponse* response) override;

 private:
  grpc::Status Authenticate(grpc::CallbackServerContext* call);

  std::atomic<const ServeContext*> ctx_{nullptr};
  const ApiKeys* api_keys_ = nullptr;
  prometheus::Counter* auth_failures_ = nullptr;
  std::atomic<int64_t> last_auth_log_{0};  // unix second of the last auth log line
  std::atomic<int64_t> tokenizer_calls_{0};  // Tokenize/Detokenize calls in flight
};

}  // namespace kvserve
