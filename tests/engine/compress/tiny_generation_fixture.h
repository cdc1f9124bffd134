// The random tiny model, its tokenizer and the CPU backend, with a deterministic prompt and
// a greedy Generate() under given KV settings: what the compression tests run on.
#pragma once
#include <memory>
#include <vector>

#include "engine/generator.h"
#include "engine/model/model_loader.h"
#include "engine/model/tokenizer.h"
#include "gtest/gtest.h"
#include "tests/engine/tiny_model.h"

namespace kvserve {

class TinyGenerationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kvserve::testing::MakeTinyModel(5, &model_, &tokenizer_, &backend_);
    if (HasFatalFailure()) return;
  }

  std::vector<int32_t> Prompt(int n) const {
    std::vector<int32_t> p;
    for (int i = 0; i < n; ++i) p.push_back(static_cast<int32_t>((i * 37 + 11) % 500));
    return p;
  }

  // Greedy generation with every step's logits kept, ignoring EOS.
  GenerationResult Run(const std::vector<int32_t>& prompt, const CompressionSettings& kv, int max_new,
                       int64_t chunk = 512, int64_t page = 16, DType kv_dtype = DType::kF32) {
    GenerationOptions o;
    o.max_new_tokens = max_new;
    o.ignore_eos = true;
    o.compression = kv;
    o.prefill_chunk = chunk;
    o.page_size = page;
    o.kv_dtype = kv_dtype;
    auto g = Generate(*model_, *tokenizer_, *backend_, prompt, o, {}, true);
    EXPECT_TRUE(g.ok()) << g.status();
    return g.ok() ? *g : GenerationResult{};
  }

  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Backend> backend_;
};

}  // namespace kvserve
