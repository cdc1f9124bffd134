// SmolLM2 with one passkey prompt of 1,024 tokens (sample 1 of 3, seed 0, plain) prefilled
// with the full cache in 256-token chunks, the default observation window's queries recorded:
// the set-up of the tests that score one real needle under several compression settings.
#pragma once
#include <memory>
#include <optional>

#include "engine/compress/compression_settings.h"
#include "engine/model/model_loader.h"
#include "engine/offline/cache_evaluator.h"
#include "engine/offline/retrieval_tasks.h"
#include "engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "tests/test_paths.h"

namespace kvserve::testing {

class SmolLm2PasskeyAt1K : public ::testing::Test {
 protected:
  void SetUp() override {
    auto model = LoadGgufModel(SmolLm2Path());
    ASSERT_TRUE(model.ok()) << model.status();
    model_.emplace(std::move(*model));
    auto tok = Tokenizer::Create(model_->tokenizer);
    ASSERT_TRUE(tok.ok()) << tok.status();
    tok_.emplace(std::move(*tok));
    backend_ = MakeCpuBackend();
    CacheEvaluatorOptions o;
    o.max_context = 1024;
    o.window = window_;  // the scored settings' window must be this
    o.prefill_chunk = 256;
    eval_ = std::make_unique<CacheEvaluator>(*model_, *tok_, *backend_, o);
    RetrievalSpec spec{1024, /*sample=*/1, /*n_samples=*/3, /*seed=*/0, PromptStyle::kPlain};
    auto sample = BuildPasskeySample(*tok_, model_->tokenizer, spec);
    ASSERT_TRUE(sample.ok()) << sample.status();
    sample_.emplace(std::move(*sample));
    ASSERT_TRUE(eval_->Prefill(*sample_).ok());
  }

  const int64_t window_ = CompressionSettings{}.window;
  std::optional<Model> model_;
  std::optional<Tokenizer> tok_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<CacheEvaluator> eval_;
  std::optional<EvalSample> sample_;
};

}  // namespace kvserve::testing
