// Greedy decoding on the default model agrees with llama.cpp: same argmax at every step
// where llama.cpp's choice is not a near-tie, and logits close. Golden data:
// tests/golden/make_generation_golden.py (llama-cpp-python on the same GGUF).
//
// The run is teacher-forced on llama.cpp's tokens, so one near-tie does not derail the
// rest of a prompt. Why not demand identity at every step: two correct Q4_1 engines differ
// by ~0.7 in logits (llama.cpp against itself with an f32 instead of f16 KV cache, or batch
// 1 instead of 512 — measured), so a top-2 gap below that is a coin toss for anyone.
//
// Run with f16 K/V (the CPU default, and what llama.cpp stored when it made the golden) and
// with f32, to the same bounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "engine/model/forward.h"
#include "engine/model/model_loader.h"
#include "nlohmann/json.hpp"
#include "tests/test_paths.h"

namespace kvserve {
namespace {

constexpr float kNearTie = 1.0f;  // llama.cpp top-1/top-2 gap below which either is fine

class LlamaCppGolden : public ::testing::TestWithParam<DType> {};

TEST_P(LlamaCppGolden, GreedyArgmaxAndLogitsMatchLlamaCpp) {
  const DType kv_dtype = GetParam();
  auto model = LoadGgufModel(testing::SmolLm2Path());
  ASSERT_TRUE(model.ok()) << model.status();
  std::ifstream in(testing::SourcePath("tests/golden/llama_cpp/greedy_smollm2.json"));
  ASSERT_TRUE(in) << "golden file missing";
  const nlohmann::json golden = nlohmann::json::parse(in);
  auto backend = MakeCpuBackend();
  const ModelConfig& c = model->config;

  double max_abs_diff = 0, sum_abs_diff = 0;
  int steps = 0, same_top1 = 0, decisive = 0, n_diffs = 0;
  for (const auto& tc : golden["cases"]) {
    const std::vector<int32_t> prompt = tc["prompt_ids"].get<std::vector<int32_t>>();
    const std::vector<int32_t> forced = tc["generated"].get<std::vector<int32_t>>();
    PagePoolShape shape{0, 16, c.n_kv_heads, c.head_dim, kv_dtype};
    shape.num_pages = (static_cast<int64_t>(prompt.size() + forced.size()) / 16 + 1) * c.n_layers;
    PagePool pool(shape);
    SequenceKv seq(c.n_layers);
    LlamaForward fwd(*model, *backend, pool);
    std::vector<float> logits;
    ForwardRequest req{prompt, 0, &seq, false};
    ASSERT_TRUE(fwd.Step({&req, 1}, &logits).ok());
    int64_t pos = static_cast<int64_t>(prompt.size());
    for (size_t step = 0; step < forced.size(); ++step) {
      const auto& ref = tc["steps"][step];
      const std::vector<int32_t> ids = ref["ids"].get<std::vector<int32_t>>();
      const std::vector<float> vals = ref["logits"].get<std::vector<float>>();
      for (size_t i = 0; i < ids.size(); ++i) {
        const double d = std::fabs(logits[ids[i]] - vals[i]);
        max_abs_diff = std::max(max_abs_diff, d);
        sum_abs_diff += d;
        ++n_diffs;
      }
      const int32_t ours = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      ++steps;
      same_top1 += ours == forced[step];
      if (vals[0] - vals[1] >= kNearTie) {
        ++decisive;
        EXPECT_EQ(ours, forced[step]) << "prompt '" << tc["text"].get<std::string>() << "' step " << step
                                      << ": llama.cpp top-2 logits " << vals[0] << ", " << vals[1]
                                      << "; ours for those ids " << logits[ids[0]] << ", " << logits[ids[1]];
      }
      logits.clear();
      ForwardRequest next{absl::MakeConstSpan(&forced[step], 1), pos++, &seq, false};
      ASSERT_TRUE(fwd.Step({&next, 1}, &logits).ok());
    }
    seq.Release(pool);
    EXPECT_EQ(pool.stats().pages_used, 0);
  }
  std::printf("llama.cpp agreement, %s K/V: top-1 identical at %d of %d steps (%d of them decisive, all must "
              "match); top-20 logits: max |diff| %.4f, mean |diff| %.4f\n",
              std::string(DTypeName(kv_dtype)).c_str(), same_top1, steps, decisive, max_abs_diff,
              sum_abs_diff / n_diffs);
  EXPECT_GE(same_top1, steps * 90 / 100);
  EXPECT_LT(max_abs_diff, 2.0);
  EXPECT_LT(sum_abs_diff / n_diffs, 0.3);
}

INSTANTIATE_TEST_SUITE_P(KvDTypes, LlamaCppGolden, ::testing::Values(DType::kF16, DType::kF32),
                         [](const ::testing::TestParamInfo<DType>& info) { return std::string(DTypeName(info.param)); });

}  // namespace
}  // namespace kvserve
