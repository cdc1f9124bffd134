// Policies with no model math of their own: keep everything, and StreamingLLM's sinks plus
// recent entries. Both score on the host from slot positions alone (no page is read), so
// they run over device pools too.
#pragma once
#include "engine/compress/kv_policy.h"

namespace kvserve {

// Every entry scores the same, so the first n_keep are kept (all of them at n_keep = len).
class FullPolicy : public ScoringPolicy {
 public:
  std::string_view Name() const override { return "full"; }
  void Score(const SelectionRequest& r, Backend& backend, BackendScratch& scratch, float* scores) const override;
};

// The first n_sink entries (attention sinks) and the most recent n_keep - n_sink.
class StreamingLlmPolicy : public ScoringPolicy {
 public:
  explicit StreamingLlmPolicy(int64_t n_sink = 4) : n_sink_(n_sink) {}
  std::string_view Name() const override { return "streaming"; }
  void Score(const SelectionRequest& r, Backend& backend, BackendScratch& scratch, float* scores) const override;

 private:
  int64_t n_sink_;
};

}  // namespace kvserve
