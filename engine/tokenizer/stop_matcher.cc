// Stop-sequence matcher: see stop_matcher.h. The buffer only ever holds less than the
// longest stop sequence plus one push, so each Push costs O(stops * (max stop + push)).
#include "engine/tokenizer/stop_matcher.h"

#include <algorithm>
#include <utility>

namespace kvserve {

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

size_t StopMatcher::HeldLength() const {
  size_t held = 0;
  for (const std::string& stop : stops_) {
    // Only lengths longer than what is already held can change the answer.
    const size_t longest = std::min(buffer_.size(), stop.size() - 1);
    for (size_t len = longest; len > held; --len) {
      if (std::string_view(buffer_).substr(buffer_.size() - len) ==
          std::string_view(stop).substr(0, len)) {
        held = len;
        break;
      }
    }
  }
  return held;
}

StopMatcher::Result StopMatcher::Push(std::string_view new_text) {
  if (stopped_) return {"", true};
  buffer_.append(new_text);

  // The earliest match wins: text after it was generated past the stop and is dropped.
  size_t first = std::string::npos;
  for (const std::string& stop : stops_) first = std::min(first, buffer_.find(stop));
  if (first != std::string::npos) {
    stopped_ = true;
    Result r{buffer_.substr(0, first), true};
    buffer_.clear();
    return r;
  }

  // Everything before the longest possible stop prefix can never become part of a match:
  // a match starting earlier would already be complete (found above) or need a longer
  // suffix of the buffer to be a stop prefix.
  const size_t safe = buffer_.size() - HeldLength();
  Result r{buffer_.substr(0, safe), false};
  buffer_.erase(0, safe);
  return r;
}

std::string StopMatcher::Flush() {
  std::string out = std::move(buffer_);
  buffer_.clear();
  return out;
}

}  // namespace kvserve
