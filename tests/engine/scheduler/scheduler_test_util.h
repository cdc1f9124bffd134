// Shared helpers for scheduler tests: collecting a request's stream and comparing batched
// greedy output with the single-sequence Generate() reference.
#pragma once
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "engine/generator.h"
#include "engine/scheduler/request.h"
#include "engine/scheduler/scheduler.h"
#include "gtest/gtest.h"

namespace kvserve {

// Everything one request's sink received.
struct Collected {
  std::vector<int32_t> tokens;
  std::string text;
  bool finished = false;
  FinishReason reason = FinishReason::kLength;
  absl::Status status;
  int64_t kv_tokens_kept = 0, kv_entries_evicted = 0;  // from the final event
};

inline RequestSink CollectInto(std::shared_ptr<Collected> c) {
  return [c](const StreamEvent& e) {
    if (e.token >= 0) c->tokens.push_back(e.token);
    c->text += e.text;
    if (e.finished) {
      c->finished = true;
      c->reason = e.finish_reason;
      c->status = e.status;
      c->kv_tokens_kept = e.kv_tokens_kept;
      c->kv_entries_evicted = e.kv_entries_evicted;
    }
  };
}

// Batched output must equal the reference token for token; float sums in a batched step
// may differ in the last bits (other GEMM paths), so a divergence is accepted only where
// the reference's top-2 logits are within near_tie of each other.
inline void ExpectSameGreedy(const GenerationResult& ref, const Collected& got, float near_tie,
                             const std::string& what) {
  const size_t n = std::min(ref.tokens.size(), got.tokens.size());
  for (size_t i = 0; i < n; ++i) {
    if (ref.tokens[i] == got.tokens[i]) continue;
    std::vector<float> top(ref.step_logits[i]);
    std::partial_sort(top.begin(), top.begin() + 2, top.end(), std::greater<float>());
    EXPECT_LT(top[0] - top[1], near_tie) << what << ": token " << i << " differs (" << got.tokens[i]
                                         << " vs reference " << ref.tokens[i] << ") at a decisive step";
    return;
  }
  EXPECT_EQ(got.tokens, ref.tokens) << what;
  EXPECT_EQ(got.text, ref.text) << what;
  EXPECT_EQ(got.reason, ref.finish_reason) << what;
}

// Runs r (which asks for prompt_logprobs) through sched until idle; the prompt logprobs its
// events carried. Any error event fails the calling test.
inline std::vector<TokenLogprob> ScorePrompt(Scheduler& sched, EngineRequest r) {
  std::vector<TokenLogprob> got;
  r.sink = [&got](const StreamEvent& e) {
    EXPECT_TRUE(e.status.ok()) << e.status;
    if (!e.prompt_logprobs.empty()) got = e.prompt_logprobs;
  };
  EXPECT_TRUE(sched.Submit(std::move(r)).ok());
  while (!sched.idle()) EXPECT_TRUE(sched.StepAndDeliver().ok());
  return got;
}

}  // namespace kvserve
