// Determinism::kBatchInvariant (--deterministic): several prompts generated greedily in shared
// forward steps — prefill chunks of some beside decode tokens of others, arriving at different
// steps — give every prompt the tokens and the logits, bit for bit, it gets alone, and whatever
// the prefill chunk size; on every kernel ISA this CPU runs, f32 and f16 KV.
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "engine/kv/kv_memory.h"
#include "engine/kv/page_pool.h"
#include "engine/model/forward.h"
#include "engine/model/model_loader.h"
#include "engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "kernels/cpu/kernel_table.h"
#include "tests/kernels/cpu/cpu_isas.h"

namespace kvserve {
namespace {

// One prompt's greedy tokens and the logits row each was taken from.
struct Greedy {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;
};

// Greedy generation of `n_new` tokens for each prompt in shared steps: prompt s joins at step
// s; each step carries every joined, unfinished prompt's next prefill chunk (at most `chunk`
// tokens) or its decode token.
std::vector<Greedy> GenerateInSteps(const Model& model, Backend& backend, const std::vector<std::vector<int32_t>>& prompts,
                                    int64_t n_new, int64_t chunk, DType kv_dtype) {
  const ModelConfig& c = model.config;
  PagePoolShape shape{0, 16, c.n_kv_heads, c.head_dim, kv_dtype};
  for (const auto& p : prompts) shape.num_pages += PeakPagesForRequest(static_cast<int64_t>(p.size()), n_new, 16, c.n_layers);
  PagePool pool(shape, &backend);
  std::vector<SequenceKv> seqs(prompts.size(), SequenceKv(c.n_layers));
  std::vector<Greedy> out(prompts.size());
  std::vector<int64_t> pos(prompts.size(), 0);
  LlamaForward fwd(model, backend, pool);
  for (size_t step = 0;; ++step) {
    std::vector<ForwardRequest> reqs;
    std::vector<size_t> who;
    for (size_t s = 0; s < prompts.size() && s <= step; ++s) {
      const int64_t len = static_cast<int64_t>(prompts[s].size());
      if (static_cast<int64_t>(out[s].tokens.size()) == n_new) continue;
      absl::Span<const int32_t> tokens = pos[s] < len
          ? absl::MakeConstSpan(prompts[s]).subspan(pos[s], std::min(chunk, len - pos[s]))
          : absl::MakeConstSpan(&out[s].tokens.back(), 1);
      reqs.push_back({tokens, pos[s], &seqs[s], false, nullptr});
      who.push_back(s);
    }
    if (reqs.empty() && step >= prompts.size()) break;
    if (reqs.empty()) continue;
    std::vector<float> logits;
    const absl::Status st = fwd.Step(reqs, &logits);
    EXPECT_TRUE(st.ok()) << st;
    if (!st.ok()) return out;
    for (size_t i = 0; i < reqs.size(); ++i) {
      const size_t s = who[i];
      pos[s] += static_cast<int64_t>(reqs[i].tokens.size());
      if (pos[s] < static_cast<int64_t>(prompts[s].size())) continue;  // mid-prompt: no token yet
      const float* row = logits.data() + i * c.vocab_size;
      out[s].logits.emplace_back(row, row + c.vocab_size);
      out[s].tokens.push_back(static_cast<int32_t>(std::max_element(row, row + c.vocab_size) - row));
    }
  }
  for (SequenceKv& s : seqs) s.Release(pool);
  return out;
}

void ExpectBitIdentical(const Greedy& got, const Greedy& want, const std::string& what) {
  ASSERT_EQ(got.tokens, want.tokens) << what;
  ASSERT_EQ(got.logits.size(), want.logits.size()) << what;
  for (size_t i = 0; i < got.logits.size(); ++i) {
    ASSERT_EQ(0, std::memcmp(got.logits[i].data(), want.logits[i].data(), got.logits[i].size() * sizeof(float)))
        << what << ": logits of token " << i << " differ";
  }
}

// Each prompt alone with chunk `chunks[0]` is the reference; all prompts together with each
// chunk size must reproduce it exactly.
void ExpectBatchedEqualsAlone(const Model& model, const std::vector<std::vector<int32_t>>& prompts, int64_t n_new,
                              const std::vector<int64_t>& chunks, DType kv_dtype) {
  auto backend = MakeCpuBackend(Determinism::kBatchInvariant);
  for (cpu::CpuIsa isa : testing::IsasThisCpuRuns()) {
    SCOPED_TRACE(testing::IsaTrace(isa));
    cpu::ScopedCpuIsa use(isa);
    std::vector<Greedy> alone;
    for (const auto& p : prompts) alone.push_back(GenerateInSteps(model, *backend, {p}, n_new, chunks[0], kv_dtype)[0]);
    for (int64_t chunk : chunks) {
      const std::vector<Greedy> together = GenerateInSteps(model, *backend, prompts, n_new, chunk, kv_dtype);
      for (size_t s = 0; s < prompts.size(); ++s) {
        ExpectBitIdentical(together[s], alone[s], "prompt " + std::to_string(s) + " batched, chunk " + std::to_string(chunk));
      }
    }
  }
}

TEST(BatchInvarianceTest, TinyModelBatchedEqualsAloneBitForBit) {
  auto model = MakeRandomModel("tiny", 5);
  ASSERT_TRUE(model.ok()) << model.status();
  std::mt19937 rng(3);
  std::vector<std::vector<int32_t>> prompts;
  for (int len : {3, 17, 40, 9, 70}) {
    prompts.emplace_back();
    for (int t = 0; t < len; ++t) prompts.back().push_back(static_cast<int32_t>(rng() % 500));
  }
  for (DType kv : {DType::kF32, DType::kF16}) {
    SCOPED_TRACE(DTypeName(kv));
    ExpectBatchedEqualsAlone(*model, prompts, 6, {7, 3, 64}, kv);
  }
}

TEST(BatchInvarianceTest, SmolLM2BatchedEqualsAloneBitForBit) {
  const char* path = std::getenv("KVSERVE_SMOLLM2_GGUF");
  if (!path || !std::filesystem::exists(path)) GTEST_SKIP() << "SmolLM2 GGUF not present";
  auto model = LoadGgufModel(path);
  ASSERT_TRUE(model.ok()) << model.status();
  auto tokenizer = Tokenizer::Create(model->tokenizer);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  std::vector<std::vector<int32_t>> prompts;
  for (const char* text : {"The capital of France is", "1, 2, 3, 4, 5,",
                           "A recipe for pancakes: first, take two eggs and a cup of flour, then whisk them with",
                           "def fibonacci(n):"}) {
    prompts.push_back(tokenizer->Encode(text, tokenizer->add_bos(), true));
  }
  // A prompt long enough for several key blocks and fixed attention splits (256 keys).
  std::vector<int32_t> long_prompt;
  for (int i = 0; i < 300; ++i) long_prompt.push_back(static_cast<int32_t>((i * 7919 + 13) % model->config.vocab_size));
  prompts.push_back(long_prompt);
  ExpectBatchedEqualsAlone(*model, prompts, 5, {5, 16, 512}, DType::kF32);
}

}  // namespace
}  // namespace kvserve
