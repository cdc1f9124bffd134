// Generation service methods. Generate and GenerateStream get their own reactors
// (grpc_unary_reactor.cc, grpc_stream_reactor.cc); the tokenizer and info methods are
// quick and answer inline with the default reactor.
#include "server/serve/grpc_generation_service.h"

#include <malloc.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/tokenizer/utf8.h"
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

// Counts a Tokenize/Detokenize call in flight for its scope; admitted() is false past the
// limit, and the call is refused.
class TokenizerCallSlot {
 public:
  TokenizerCallSlot(std::atomic<int64_t>& in_flight, int64_t limit)
      : in_flight_(in_flight), admitted_(in_flight.fetch_add(1) < limit) {}
  ~TokenizerCallSlot() { in_flight_.fetch_sub(1); }
  bool admitted() const { return admitted_; }

 private:
  std::atomic<int64_t>& in_flight_;
  const bool admitted_;
};

grpc::Status TooManyTokenizerCalls(int64_t limit) {
  return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                      absl::StrCat("more than ", limit,
                                   " Tokenize/Detokenize calls at once (--max-concurrent-tokenize); retry shortly"));
}

// A large call's buffers go back to the OS rather than stay in the heap's free lists.
constexpr size_t kTrimAfterBytes = 1 << 20;

class RejectedStream : public grpc::ServerWriteReactor<v1::GenerateStreamResponse> {
 public:
  explicit RejectedStream(const grpc::Status& st) { Finish(st); }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::Status GenerationService::Authenticate(grpc::CallbackServerContext* call) {
  if (!api_keys_ || api_keys_->Allows(call->client_metadata())) return grpc::Status::OK;
  if (auth_failures_) auth_failures_->Increment();
  // At most one line a second, so a client cannot flood the log with bad tokens.
  const int64_t now = absl::ToUnixSeconds(absl::Now());
  int64_t last = last_auth_log_.load();
  if (now > last && last_auth_log_.compare_exchange_strong(last, now)) {
    std::fprintf(stderr, "kvserve serve: rejected a call without a valid API key from %s\n", call->peer().c_str());
  }
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "missing or invalid API key");
}

grpc::ServerUnaryReactor* GenerationService::Generate(grpc::CallbackServerContext* call,
                                                      const v1::GenerateRequest* request,
                                                      v1::GenerateResponse* response) {
  if (grpc::Status st = Authenticate(call); !st.ok()) return Answer(call, st);
  const ServeContext* ctx = ctx_.load();
  if (ctx == nullptr) return Answer(call, kLoading);
  return StartGenerate(*ctx, call, *request, response);
}

grpc::ServerWriteReactor<v1::GenerateStreamResponse>* GenerationService::GenerateStream(
    grpc::CallbackServerContext* call, const v1::GenerateRequest* request) {
  if (grpc::Status st = Authenticate(call); !st.ok()) return new RejectedStream(st);
  const ServeContext* ctx = ctx_.load();
  if (ctx == nullptr) return new RejectedStream(kLoading);
  return StartGenerateStream(*ctx, call, *request);
}

grpc::ServerUnaryReactor* GenerationService::Tokenize(grpc::CallbackServerContext* call,
                                                      const v1::TokenizeRequest* request,
                                                      v1::TokenizeResponse* response) {
  if (grpc::Status st = Authenticate(call); !st.ok()) return Answer(call, st);
  const ServeContext* ctx = ctx_.load();
  if (ctx == nullptr) return Answer(call, kLoading);
  TokenizerCallSlot slot(tokenizer_calls_, ctx->options.max_concurrent_tokenize);
  if (!slot.admitted()) return Answer(call, TooManyTokenizerCalls(ctx->options.max_concurrent_tokenize));
  size_t input_bytes = request->text().size();
  for (const v1::ChatMessage& m : request->messages()) input_bytes += m.content().size();
  if (static_cast<int64_t>(input_bytes) > ctx->options.max_tokenize_bytes) {
    return Answer(call, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                     absl::StrCat(request->messages_size() > 0 ? "messages" : "text", " has ",
                                                  input_bytes, " bytes, the limit is ",
                                                  ctx->options.max_tokenize_bytes, " (--max-tokenize-bytes)")));
  }
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
    const std::string bytes = ctx->tokenizer.TokenBytes(id);
    response->add_token_ids(id);
    response->add_pieces(utf8::Sanitize(bytes));  // string fields must be valid UTF-8
    response->add_piece_bytes(bytes);
  }
  text.clear();
  text.shrink_to_fit();
  if (input_bytes > kTrimAfterBytes) malloc_trim(0);
  return Answer(call, grpc::Status::OK);
}

grpc::ServerUnaryReactor* GenerationService::Detokenize(grpc::CallbackServerContext* call,
                                                        const v1::DetokenizeRequest* request,
                                                        v1::DetokenizeResponse* response) {
  if (grpc::Status st = Authenticate(call); !st.ok()) return Answer(call, st);
  const ServeContext* ctx = ctx_.load();
  if (ctx == nullptr) return Answer(call, kLoading);
  TokenizerCallSlot slot(tokenizer_calls_, ctx->options.max_concurrent_tokenize);
  if (!slot.admitted()) return Answer(call, TooManyTokenizerCalls(ctx->options.max_concurrent_tokenize));
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
  const std::string text = ctx->tokenizer.Decode(ids);
  const bool valid = utf8::IsValid(text);
  response->set_text(valid ? text : utf8::Sanitize(text));
  response->set_replaced_invalid_utf8(!valid);
  return Answer(call, grpc::Status::OK);
}

grpc::ServerUnaryReactor* GenerationService::GetModelInfo(grpc::CallbackServerContext* call,
                                                          const v1::GetModelInfoRequest* /*request*/,
                                                          v1::GetModelInfoResponse* r) {
  if (grpc::Status st = Authenticate(call); !st.ok()) return Answer(call, st);
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
