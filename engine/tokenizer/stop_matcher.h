// Finds stop sequences in a streamed generation: holds back text that might still grow
// into a stop sequence, so a client never sees part of a stop string that is later cut.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace kvserve {

class StopMatcher {
 public:
  // Empty strings are ignored (they would match before any text).
  explicit StopMatcher(std::vector<std::string> stops);

  struct Result {
    std::string emit;      // text now safe to show; on a stop, the text before the match
    bool stopped = false;  // a stop sequence matched; it is never part of emit
  };

  // Appends generated text (stop sequences may span several pushes). Once stopped, every
  // later Push returns {"", true}.
  Result Push(std::string_view new_text);

  // Generation ended without a stop: returns the held-back text (empty once stopped).
  std::string Flush();

 private:
  // Length of the longest suffix of buffer_ that is a proper prefix of some stop.
  size_t HeldLength() const;

  std::vector<std::string> stops_;
  std::string buffer_;  // text received but not yet emitted
  bool stopped_ = false;
};

}  // namespace kvserve
