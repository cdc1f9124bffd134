// The kl task's corpus: long texts tokenized once, cut into context + continuation windows.
#include "engine/offline/text_corpus.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace kvserve {

std::string DefaultCorpusDir() {
  const std::filesystem::path here = "tests/data/corpus";
  if (std::filesystem::is_directory(here)) return here.string();
  // This file's own path (absolute under CMake): engine/offline/ -> the source root. No build
  // flag is needed, and an installed binary still finds the corpus of its checkout.
  return (std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() / here).string();
}

absl::StatusOr<TextCorpus> TextCorpus::Load(const std::string& dir, const Tokenizer& tokenizer) {
  std::error_code ec;
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.is_regular_file() && e.path().extension() == ".txt") files.push_back(e.path());
  }
  if (ec || files.empty()) {
    return absl::NotFoundError(absl::StrCat("corpus folder '", dir, "' holds no .txt file",
                                            ec ? absl::StrCat(" (", ec.message(), ")") : ""));
  }
  std::sort(files.begin(), files.end());
  TextCorpus corpus;
  corpus.bos_ = tokenizer.add_bos() ? tokenizer.bos_id() : -1;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) return absl::NotFoundError(absl::StrCat("corpus text '", f.string(), "' cannot be read"));
    corpus.names_.push_back(f.filename().string());
    corpus.tokens_.push_back(tokenizer.Encode(text.str(), false, false));
  }
  return corpus;
}

absl::StatusOr<EvalSample> TextCorpus::Sample(int64_t context_tokens, int64_t continuation, int64_t sample,
                                              uint64_t seed) const {
  const int64_t from_text = context_tokens - (bos_ >= 0 ? 1 : 0), need = from_text + continuation;
  std::vector<size_t> long_enough;
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (static_cast<int64_t>(tokens_[i].size()) >= need) long_enough.push_back(i);
  }
  if (long_enough.empty() || from_text < 1) {
    size_t longest = 0;
    for (const auto& t : tokens_) longest = std::max(longest, t.size());
    return absl::InvalidArgumentError(absl::StrCat("no corpus text holds a ", context_tokens, "-token context + ",
                                                   continuation, " continuation tokens (the longest has ", longest,
                                                   " tokens)"));
  }
  const size_t text = long_enough[static_cast<size_t>(sample) % long_enough.size()];
  const std::vector<int32_t>& t = tokens_[text];
  SampleRng rng(seed, "kl", context_tokens, sample);
  const int64_t offset = rng.Uniform(0, static_cast<int64_t>(t.size()) - need);
  EvalSample s;
  s.context.resize(static_cast<size_t>(context_tokens));
  if (bos_ >= 0) s.context[0] = bos_;
  std::copy_n(t.begin() + offset, from_text, s.context.end() - from_text);
  s.continuation.assign(t.begin() + offset + from_text, t.begin() + offset + need);
  s.source = absl::StrCat(names_[text], " @ token ", offset);
  return s;
}

}  // namespace kvserve
