// One OpenAI call's generation: its choices submitted to the Engine, their output collected
// from the engine thread and handed to the HTTP worker that writes the response, in whatever
// pieces arrived since it last looked. The worker polls (Take with a timeout) rather than being
// called back, because cpp-httplib writes a response from the worker's own thread; between
// polls it checks that the client is still there, and a client gone aborts the choices.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/scheduler/request.h"
#include "kvserve/v1/generation.pb.h"
#include "server/serve/grpc_serve_context.h"

namespace kvserve {

// New output of one choice since the last Take (or all of it, accumulated by Append).
struct ChoiceOutput {
  int64_t index = 0;
  std::vector<int32_t> tokens;
  std::string text;
  std::vector<TokenLogprob> logprobs;  // one per token when logprobs were asked for
  // With prompt logprobs: one per prompt token after the first, in the choice's first piece.
  std::vector<TokenLogprob> prompt_logprobs;
  // Set once, when the choice ends: finish reason, error, usage (no token ids, text or
  // logprobs: those came in the pieces before).
  std::optional<v1::Completion> final;

  bool empty() const { return tokens.empty() && text.empty() && !final; }
  void Append(ChoiceOutput&& later);
};

class HttpGeneration {
 public:
  // Registers the call with the drain tracker (UNAVAILABLE when draining) and submits every
  // choice; a rejected submission (a full queue: RESOURCE_EXHAUSTED with the queue-full
  // payload) aborts the ones already in and is returned. Choice i is requests[i].
  static absl::StatusOr<std::unique_ptr<HttpGeneration>> Start(const ServeContext& ctx,
                                                               std::vector<EngineRequest> requests);
  // Aborts the choices still running (their pages go back now) and ends the call.
  ~HttpGeneration();
  HttpGeneration(const HttpGeneration&) = delete;
  HttpGeneration& operator=(const HttpGeneration&) = delete;

  // Waits up to `timeout` for output, then returns each choice's new output (choices with
  // none are left out).
  std::vector<ChoiceOutput> Take(std::chrono::milliseconds timeout);
  // Every choice has ended and its output has been taken.
  bool done();
  // Aborts the choices still running; safe to call more than once.
  void Abort();

 private:
  struct State;
  HttpGeneration(const ServeContext& ctx, std::shared_ptr<State> state);

  const ServeContext& ctx_;
  std::shared_ptr<State> state_;
};

}  // namespace kvserve
