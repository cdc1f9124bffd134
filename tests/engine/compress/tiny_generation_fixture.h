// The random tiny model, its tokenizer and the CPU backend, with a deterministic prompt and
// a greedy Generate() under given KV settings: what the compression tests run on.
#pragma once
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include "engine/compress/sequence_compressor.h"
#include "engine/generator.h"
#include "engine/model/forward.h"
#include "engine/model/model_loader.h"
#include "engine/tokenizer/tokenizer.h"
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

  // Prefill of Prompt(prompt_len) in one step, then greedy decode up to prompt_len + max_new
  // tokens, compressing after every step as the generator does, in a pool of exactly the
  // compressor's peak pages; check(compressor, sequence, position) runs after each step.
  // Fails the test on a step or compression error or a NaN logit; returns the compressor.
  std::unique_ptr<SequenceCompressor> DecodeCompressed(
      const CompressionSettings& kv, int64_t prompt_len, int64_t max_new, int64_t page_size,
      const std::function<void(const SequenceCompressor&, const SequenceKv&, int64_t)>& check) {
    const ModelConfig& c = model_->config;
    auto made = SequenceCompressor::Create(*model_, kv, prompt_len, max_new, page_size, 512);
    EXPECT_TRUE(made.ok()) << made.status();
    if (!made.ok()) return nullptr;
    SequenceCompressor& comp = **made;
    PagePool pool({comp.PeakPages(), page_size, c.n_kv_heads, c.head_dim});
    SequenceKv seq(c.n_layers);
    LlamaForward fwd(*model_, *backend_, pool);
    std::vector<int32_t> tokens = Prompt(static_cast<int>(prompt_len));
    std::vector<float> logits;
    int64_t pos = 0;
    while (pos < prompt_len + max_new - 1 && !::testing::Test::HasFailure()) {
      logits.clear();
      const auto span = absl::MakeConstSpan(tokens).subspan(pos);
      ForwardRequest req{span, pos, &seq, false, comp.window()};
      const absl::Status st = fwd.Step({&req, 1}, &logits);
      EXPECT_TRUE(st.ok()) << kv.policy << " at position " << pos << ": " << st;
      if (!st.ok()) break;
      pos += static_cast<int64_t>(span.size());
      const absl::Status compressed = comp.AfterStep(*backend_, pool, seq, true);
      EXPECT_TRUE(compressed.ok()) << kv.policy << " at position " << pos << ": " << compressed;
      if (!compressed.ok()) break;
      check(comp, seq, pos);
      EXPECT_TRUE(std::none_of(logits.begin(), logits.end(), [](float x) { return std::isnan(x); })) << kv.policy;
      tokens.push_back(static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
    }
    EXPECT_LE(pool.stats().pages_peak, comp.PeakPages()) << kv.policy;
    seq.Release(pool);
    return *std::move(made);
  }

  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Backend> backend_;
};

}  // namespace kvserve
