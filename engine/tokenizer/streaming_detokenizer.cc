// Incremental UTF-8-safe detokenization; see streaming_detokenizer.h.
#include "engine/tokenizer/streaming_detokenizer.h"

#include "engine/tokenizer/utf8.h"

namespace kvserve {

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tokenizer, bool render_special)
    : tokenizer_(tokenizer), render_special_(render_special) {}

std::string StreamingDetokenizer::Push(int32_t id) {
  if (!render_special_ && tokenizer_.IsControl(id)) return {};
  pending_ += tokenizer_.TokenBytes(id);
  const size_t n = utf8::CompletePrefixLength(pending_);
  if (n == 0) return {};
  // Stray bytes inside the complete prefix can never become valid: replace them now.
  std::string out = utf8::Sanitize(std::string_view(pending_).substr(0, n));
  pending_.erase(0, n);
  return out;
}

std::string StreamingDetokenizer::Flush() {
  std::string out = utf8::Sanitize(pending_);
  pending_.clear();
  return out;
}

}  // namespace kvserve
