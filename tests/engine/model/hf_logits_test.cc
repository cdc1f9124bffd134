// Our forward pass against transformers: logits at every position of the golden checkpoints
// (tests/golden/hf/<name>/logits.bin, made by tests/golden/make_hf_golden.py), with K/V stored
// as f32 (transformers' own precision: 1e-4 of the largest logit) and as f16 (the CPU default,
// which rounds every K/V element to 11 significant bits: FP16_TOLERANCE below).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <tuple>

#include "engine/model/forward.h"
#include "engine/model/model_loader.h"
#include "kernels/backend.h"
#include "nlohmann/json.hpp"
#include "tests/test_paths.h"

namespace kvserve {
namespace {

// Bounds on |ours - transformers| / max|transformers| at a position. Measured (2026-12-02),
// the worst position of llama, qwen2, mistral: f32 K/V 5.4e-7, 3.5e-7, 5.6e-7; f16 K/V 3.8e-4,
// 1.8e-4, 4.4e-4 (fp16's 2^-11 relative rounding of K and V, carried through the layers), so
// f16 gets 1e-3, ~2x its worst.
constexpr float kF32Tolerance = 1e-4f;
constexpr float kF16Tolerance = 1e-3f;

class HfLogitsTest : public ::testing::TestWithParam<std::tuple<std::string, DType>> {};

TEST_P(HfLogitsTest, MatchesTransformersAtEveryPosition) {
  const auto& [name, kv_dtype] = GetParam();
  const float tolerance = kv_dtype == DType::kF16 ? kF16Tolerance : kF32Tolerance;
  const std::string dir = testing::SourcePath("tests/golden/hf/" + name);
  std::ifstream meta_in(dir + "/logits.json");
  ASSERT_TRUE(meta_in) << dir;
  std::stringstream ss;
  ss << meta_in.rdbuf();
  nlohmann::json meta = nlohmann::json::parse(ss.str());
  const std::vector<int32_t> tokens = meta["tokens"].get<std::vector<int32_t>>();
  const int64_t vocab = meta["vocab"].get<int64_t>();

  std::ifstream bin(dir + "/logits.bin", std::ios::binary);
  std::vector<float> want(tokens.size() * vocab);
  bin.read(reinterpret_cast<char*>(want.data()), static_cast<std::streamsize>(want.size() * 4));
  ASSERT_EQ(bin.gcount(), static_cast<std::streamsize>(want.size() * 4));

  auto model = LoadHfModel(dir);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ(model->config.vocab_size, vocab);
  auto backend = MakeCpuBackend();
  auto got = ComputeAllLogits(*model, *backend, tokens, kv_dtype);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), want.size());

  float worst = 0;
  for (size_t p = 0; p < tokens.size(); ++p) {
    float max_ref = 0, max_diff = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      const float ref = want[p * vocab + v];
      max_ref = std::max(max_ref, std::fabs(ref));
      max_diff = std::max(max_diff, std::fabs((*got)[p * vocab + v] - ref));
    }
    ASSERT_GT(max_ref, 0.0f);
    worst = std::max(worst, max_diff / max_ref);
    EXPECT_LE(max_diff / max_ref, tolerance) << name << " " << DTypeName(kv_dtype) << " K/V, position " << p
                                             << " max|diff| " << max_diff << " max|ref| " << max_ref;
  }
  std::printf("%s, %s K/V: worst max|diff| / max|ref| over %zu positions %.3g (tolerance %.0e)\n", name.c_str(),
              std::string(DTypeName(kv_dtype)).c_str(), tokens.size(), worst, tolerance);
}

INSTANTIATE_TEST_SUITE_P(Golden, HfLogitsTest,
                         ::testing::Combine(::testing::Values("llama", "qwen2", "mistral"),
                                            ::testing::Values(DType::kF32, DType::kF16)),
                         [](const ::testing::TestParamInfo<std::tuple<std::string, DType>>& info) {
                           return std::get<0>(info.param) + "_" + std::string(DTypeName(std::get<1>(info.param)));
                         });

}  // namespace
}  // namespace kvserve
