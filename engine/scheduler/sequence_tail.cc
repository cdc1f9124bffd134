#include "engine/scheduler/sequence_tail.h"

#include <algorithm>
#include <cmath>

namespace kvserve {

TokenLogprob LogprobOf(absl::Span<const float> logits, int32_t token, int32_t top_n) {
  float mx = logits[0];
  for (float x : logits) mx = std::max(mx, x);
  double sum = 0;
  for (float x : logits) sum += std::exp(x - mx);
  const double lse = mx + std::log(sum);
  TokenLogprob out{token, static_cast<float>(logits[token] - lse), {}};
  // The best n ids in a short sorted list (ties to the lower id): one pass over the vocabulary,
  // no copy of it, since prompt scoring runs this for every prompt row.
  const size_t n = static_cast<size_t>(std::clamp<int64_t>(top_n, 0, static_cast<int64_t>(logits.size())));
  auto better = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  std::vector<int32_t> best;
  best.reserve(n + 1);
  for (int32_t i = 0; n > 0 && i < static_cast<int32_t>(logits.size()); ++i) {
    if (best.size() == n && !better(i, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), i, better), i);
    if (best.size() > n) best.pop_back();
  }
  for (int32_t id : best) out.top.emplace_back(id, static_cast<float>(logits[id] - lse));
  return out;
}

void TokenLogprobs(absl::Span<const float> logits, int32_t token, int32_t top_n, StreamEvent* e) {
  TokenLogprob lp = LogprobOf(logits, token, top_n);
  e->logprob = lp.logprob;
  e->top_logprobs = std::move(lp.top);
}

void AppendPromptLogprobs(absl::Span<const float> rows, int64_t vocab, absl::Span<const int32_t> next_tokens,
                          int32_t top_n, std::vector<TokenLogprob>* out) {
  for (size_t j = 0; j < next_tokens.size(); ++j) {
    out->push_back(LogprobOf(rows.subspan(j * vocab, vocab), next_tokens[j], top_n));
  }
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
  if (request_.max_new_tokens == 0) {  // a prompt only scored: nothing to sample
    events.push_back(FinalEvent(FinishReason::kLength, true));
    return events;
  }
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
