// Generation service methods. Generate and GenerateStream get their own reactors
// (grpc_unary_reactor.cc, grpc_stream_reactor.cc); the tokenizer and info methods are
// quick and answer inline with the default reactor.
#include "server/serve/grpc_generation_service.h"

#include "absl/strings/str_cat.h"
#include "engine/compress/compression_settings.h"
#include "server/serve/grpc_request.h"
#include "server/serve/grpc_stream_reactor.h"
#include "server/serve/grpc_unary_reactor.h"

namespace kvserve {
namespace {

const grpc::Status kLoading(grpc::StatusCode::UNAVAILABLE, "the model is still loading; retry shortly");

grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* call, const grpc::Status& st) {
  grpc::ServerUnaryReactor* r = call->DefaultReactor();
  r->Finish(st);
  return r;
}

class RejectedStream : public grpc::ServerWriteReactor<v1::GenerateStreamResponse> {
 public:
  explicit RejectedStream(const grpc::Status& st) { Finish(st); }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::ServerUnaryReactor* GenerationService::Generate(grpc::CallbackServerContext* call,
                                                      const v1::GenerateRequest* request,
                                                      v1::GenerateResponse* response) {
  const ServeContext* ctx = ctx_.load();
  if (ctx == nullptr) return Answer(call, kLoading);
  return StartGenerate(*ctx, call, *request, response);
}

grpc::ServerWriteReactor<v1::GenerateStreamResponse>* GenerationService::GenerateStream(
    grpc::CallbackServerContext* call, const v1::GenerateRequest* request) {
  const ServeContext* ctx = ctx_.load();
  if (ctx == nullptr) return new RejectedStream(kLoading);
  return StartGenerateStream(*ctx, call, *request);
}

grpc::ServerUnaryReactor* GenerationService::Tokenize(grpc::CallbackServerContext* call,
                                                      const v1::TokenizeRequest* request,
                                                      v1::TokenizeResponse* response) {
  const ServeContext* ctx = ctx_.load();
  if (ctx == nullptr) return Answer(call, kLoading);
  std::string text = request->text();
  if (request->messages_size() > 0) {
    if (!text.empty()) {
      return Answer(call, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "set text or messages, not both"));
    }
    absl::StatusOr<std::string> rendered = RenderMessages(*ctx, request->messages(), "messages");
    if (!rendered.ok()) return Answer(call, ToGrpcStatus(rendered.status()));
    text = *std::move(rendered);
  }
  const bool bos = request->add_special_tokens() && ctx->tokenizer.add_bos();
  for (int32_t id : ctx->tokenizer.Encode(text, bos, /*parse_special=*/true)) {
    response->add_token_ids(id);
    response->add_pieces(ctx->tokenizer.TokenBytes(id));
  }
  return Answer(call, grpc::Status::OK);
}

grpc::ServerUnaryReactor* GenerationService::Detokenize(grpc::CallbackServerContext* call,
                                                        const v1::DetokenizeRequest* request,
                                                        v1::DetokenizeResponse* response) {
  const ServeContext* ctx = ctx_.load();
  if (ctx == nullptr) return Answer(call, kLoading);
  const int64_t vocab = ctx->model.config.vocab_size;
  std::vector<int32_t> ids;
  for (int j = 0; j < request->token_ids_size(); ++j) {
    const int32_t t = request->token_ids(j);
    if (t < 0 || t >= vocab) {
      return Answer(call, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                       absl::StrCat("token_ids[", j, "] = ", t, " is outside the vocabulary [0, ",
                                                    vocab, ")")));
    }
    if (request->skip_special_tokens() && ctx->tokenizer.IsControl(t)) continue;
    ids.push_back(t);
  }
  response->set_text(ctx->tokenizer.Decode(ids));
  return Answer(call, grpc::Status::OK);
}

grpc::ServerUnaryReactor* GenerationService::GetModelInfo(grpc::CallbackServerContext* call,
                                                          const v1::GetModelInfoRequest* /*request*/,
                                                          v1::GetModelInfoResponse* r) {
  const ServeContext* ctx = ctx_.load();
  if (ctx == nullptr) return Answer(call, kLoading);
  const ModelConfig& c = ctx->model.config;
  r->set_model(ctx->model.source);
  r->set_architecture(c.architecture);
  r->set_vocab_size(c.vocab_size);
  r->set_n_layers(c.n_layers);
  r->set_n_heads(c.n_heads);
  r->set_n_kv_heads(c.n_kv_heads);
  r->set_head_dim(c.head_dim);
  r->set_hidden_size(c.hidden);
  r->set_trained_context(c.max_context);
  r->set_max_context(ctx->max_context);
  r->set_max_new_tokens_limit(ctx->max_new_tokens_limit);
  r->set_default_max_new_tokens(ctx->options.default_max_new_tokens);
  r->set_max_receive_message_bytes(ctx->options.max_receive_message_bytes);
  r->set_max_prompts_per_call(ctx->options.max_prompts_per_call);
  r->set_has_chat_template(!ctx->model.tokenizer.chat_template.empty());
  r->set_bos_token_id(ctx->tokenizer.bos_id());
  r->set_eos_token_id(ctx->tokenizer.eos_id());
  r->set_kv_page_size(ctx->options.page_size);
  r->set_kv_pages_total(ctx->kv_pages_total);
  for (const std::string& p : KvPolicyNames()) r->add_kv_policies(p);
  const CompressionSettings& kv = ctx->kv_defaults;
  r->set_default_kv_policy(kv.policy);
  r->set_default_kv_budget(kv.budget);
  r->set_default_budget_plan(std::string(BudgetPlanName(PlanOf(kv))));
  r->set_default_compress_at(std::string(CompressAtName(kv.at)));
  return Answer(call, grpc::Status::OK);
}

}  // namespace kvserve
