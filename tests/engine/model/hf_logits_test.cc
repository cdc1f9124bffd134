// Our forward pass against transformers: logits at every position of the golden checkpoints
// (tests/golden/hf/<name>/logits.bin, made by tests/golden/make_hf_golden.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "engine/model/forward.h"
#include "engine/model/model_loader.h"
#include "kernels/backend.h"
#include "nlohmann/json.hpp"
#include "tests/test_paths.h"

namespace kvserve {
namespace {

class HfLogitsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(HfLogitsTest, MatchesTransformersAtEveryPosition) {
  const std::string dir = testing::SourcePath("tests/golden/hf/" + GetParam());
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
  auto got = ComputeAllLogits(*model, *backend, tokens);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), want.size());

  for (size_t p = 0; p < tokens.size(); ++p) {
    float max_ref = 0, max_diff = 0;
    for (int64_t v = 0; v < vocab; ++v) {
      const float ref = want[p * vocab + v];
      max_ref = std::max(max_ref, std::fabs(ref));
      max_diff = std::max(max_diff, std::fabs((*got)[p * vocab + v] - ref));
    }
    ASSERT_GT(max_ref, 0.0f);
    EXPECT_LE(max_diff / max_ref, 1e-4f) << GetParam() << " position " << p << " max|diff| "
                                         << max_diff << " max|ref| " << max_ref;
  }
}

INSTANTIATE_TEST_SUITE_P(Golden, HfLogitsTest, ::testing::Values("llama", "qwen2", "mistral"));

}  // namespace
}  // namespace kvserve
