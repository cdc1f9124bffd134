// Policies with no model math of their own: keep everything, StreamingLLM's sinks plus
// recent entries, and "top n by a scorer" (SnapKV is the SnapKV scorer under it).
#pragma once
#include <memory>
#include <string>

#include "engine/compress/kv_policy.h"

namespace kvserve {

class FullPolicy : public KvPolicy {
 public:
  std::string_view Name() const override { return "full"; }
  Selection Select(const SelectionRequest& r, Backend& backend) const override;
};

// The first n_sink entries (attention sinks) and the most recent n_keep - n_sink.
class StreamingLlmPolicy : public KvPolicy {
 public:
  explicit StreamingLlmPolicy(int64_t n_sink = 4) : n_sink_(n_sink) {}
  std::string_view Name() const override { return "streaming"; }
  Selection Select(const SelectionRequest& r, Backend& backend) const override;

 private:
  int64_t n_sink_;
};

class ScorerPolicy : public KvPolicy {
 public:
  ScorerPolicy(std::string name, std::unique_ptr<KvScorer> scorer) : name_(std::move(name)), scorer_(std::move(scorer)) {}
  std::string_view Name() const override { return name_; }
  Selection Select(const SelectionRequest& r, Backend& backend) const override;
  bool ScoresWithQueries() const override { return scorer_->UsesQueries(); }

 private:
  std::string name_;
  std::unique_ptr<KvScorer> scorer_;
};

}  // namespace kvserve
