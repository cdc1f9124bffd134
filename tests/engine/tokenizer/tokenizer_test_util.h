// Shared by the tokenizer tests: golden JSON loading, the SmolLM2 tokenizer loaded once,
// and the small SentencePiece spec that tests/golden/make_tokenizer_golden.py also built.
#pragma once
#include <fstream>
#include <sstream>
#include <string>

#include "engine/model/model_loader.h"
#include "engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/test_paths.h"

namespace kvserve::testing {

inline nlohmann::json ReadGoldenJson(const std::string& rel) {
  std::ifstream in(SourcePath(rel));
  EXPECT_TRUE(in.good()) << "missing golden file " << rel;
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

// The SmolLM2 GGUF's tokenizer spec, read once per test binary through the real loader.
inline const TokenizerSpec& SmolLm2TokenizerSpec() {
  static const TokenizerSpec* spec = [] {
    absl::StatusOr<Model> model = LoadGgufModel(SmolLm2Path());
    EXPECT_TRUE(model.ok()) << model.status() << " (run scripts/fetch-model.sh)";
    return new TokenizerSpec(model.ok() ? model->tokenizer : TokenizerSpec{});
  }();
  return *spec;
}

inline const Tokenizer* SmolLm2Tokenizer() {
  static const Tokenizer* tok = [] {
    absl::StatusOr<Tokenizer> t = Tokenizer::Create(SmolLm2TokenizerSpec());
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? new Tokenizer(*std::move(t)) : nullptr;
  }();
  return tok;
}

// TokenizerSpec of tests/golden/tokenizer_spm_tiny.json's "vocab".
inline TokenizerSpec SpmTinySpec(const nlohmann::json& vocab) {
  TokenizerSpec s;
  s.model = "llama";
  s.tokens = vocab["tokens"].get<std::vector<std::string>>();
  s.scores = vocab["scores"].get<std::vector<float>>();
  for (int t : vocab["types"]) s.types.push_back(static_cast<TokenType>(t));
  s.bos_id = vocab["bos_id"];
  s.eos_id = vocab["eos_id"];
  s.unk_id = vocab["unk_id"];
  s.add_bos = vocab["add_bos"];
  s.add_space_prefix = vocab["add_space_prefix"];
  return s;
}

}  // namespace kvserve::testing
