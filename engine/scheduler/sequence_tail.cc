#include "engine/scheduler/sequence_tail.h"

#include <algorithm>
#include <cmath>

namespace kvserve {

void TokenLogprobs(absl::Span<const float> logits, int32_t token, int32_t top_n, StreamEvent* e) {
  double mx = logits[0];
  for (float x : logits) mx = std::max(mx, static_cast<double>(x));
  double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - mx);
  const double lse = mx + std::log(sum);
  e->logprob = static_cast<float>(logits[token] - lse);
  const int32_t n = std::min<int32_t>(top_n, static_cast<int32_t>(logits.size()));
  std::vector<int32_t> ids(logits.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  e->top_logprobs.clear();
  for (int32_t i = 0; i < n; ++i) e->top_logprobs.emplace_back(ids[i], static_cast<float>(logits[ids[i]] - lse));
}

SequenceTail::SequenceTail(const EngineRequest& r, const Tokenizer& tokenizer)
    : request_(r), tokenizer_(tokenizer), sampler_(r.sampling), stops_(r.stop_sequences), detok_(tokenizer),
      history_(r.prompt) {}

StreamEvent SequenceTail::TokenEvent(int32_t token, std::string text, absl::Span<const float> logits) const {
  StreamEvent e;
  e.token = token;
  e.text = std::move(text);
  if (request_.top_logprobs > 0) TokenLogprobs(logits, token, request_.top_logprobs, &e);
  if (request_.keep_logits) e.logits.assign(logits.begin(), logits.end());
  return e;
}

StreamEvent SequenceTail::FinalEvent(FinishReason reason, bool flush) {
  StreamEvent e;
  if (flush) {
    StopMatcher::Result r = stops_.Push(detok_.Flush());
    e.text = std::move(r.emit);
    if (r.stopped) {
      reason = FinishReason::kStopSequence;
    } else {
      e.text += stops_.Flush();
    }
  }
  e.finished = true;
  e.finish_reason = reason;
  return e;
}

std::vector<StreamEvent> SequenceTail::Next(absl::Span<const float> logits) {
  std::vector<StreamEvent> events;
  const int32_t id = sampler_.Sample(logits, history_);
  if (!request_.ignore_eos && tokenizer_.IsEndOfGeneration(id)) {
    events.push_back(FinalEvent(FinishReason::kEos, true));
    // The step's logits still belong to the caller who keeps them: they chose EOS.
    if (request_.keep_logits) events.back().logits.assign(logits.begin(), logits.end());
    return events;
  }
  history_.push_back(id);
  ++generated_;
  if (std::find(request_.stop_token_ids.begin(), request_.stop_token_ids.end(), id) !=
      request_.stop_token_ids.end()) {
    events.push_back(TokenEvent(id, "", logits));
    events.push_back(FinalEvent(FinishReason::kStopToken, true));
    return events;
  }
  StopMatcher::Result m = stops_.Push(detok_.Push(id));
  events.push_back(TokenEvent(id, std::move(m.emit), logits));
  if (m.stopped) {
    events.push_back(FinalEvent(FinishReason::kStopSequence, false));
  } else if (generated_ == request_.max_new_tokens) {
    events.push_back(FinalEvent(FinishReason::kLength, true));
  }
  return events;
}

}  // namespace kvserve
