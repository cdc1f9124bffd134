// The RippleKV profiler and its validation on the tiny random model: finite, seeded
// sensitivities that follow a layer's values, and layer damage that grows as a layer keeps less.
#include <cmath>
#include <memory>

#include "engine/model/model_loader.h"
#include "engine/offline/ripple_profiler.h"
#include "engine/offline/ripple_validation.h"
#include "engine/offline/text_corpus.h"
#include "engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "tests/test_paths.h"

namespace kvserve {
namespace {

class RippleProfilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = MakeRandomModel("tiny", 1);
    ASSERT_TRUE(m.ok());
    model_ = std::make_unique<Model>(*std::move(m));
  }
  std::unique_ptr<Model> model_;
};

std::vector<std::vector<int32_t>> Samples(int n, int len) {
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> t;
    for (int j = 0; j < len; ++j) t.push_back((j * 31 + i * 7 + 3) % 500);
    out.push_back(t);
  }
  return out;
}

TEST_F(RippleProfilerTest, ProfilerGivesFiniteScoresThatRespondToALayersValues) {
  auto backend = MakeCpuBackend();
  ProfilerOptions o;
  o.scored_tokens = 8;
  o.seed = 1;
  const auto samples = Samples(2, 48);
  auto s = MeasureLayerSensitivity(*model_, *backend, samples, o);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), 2u);
  for (double v : *s) {
    EXPECT_TRUE(std::isfinite(v));
    EXPECT_GT(v, 0.0);
  }
  // Deterministic under the seed.
  EXPECT_EQ(*MeasureLayerSensitivity(*model_, *backend, samples, o), *s);

  // Layer 1's value projection scaled: x8 makes its values matter more, x0 makes them
  // zero, so noise scaled to their RMS is zero too and the layer has no sensitivity.
  auto with_layer1_values_scaled = [&](float k) {
    Model scaled = *model_;
    const WeightView& wv = model_->weights.layers[1].wv;
    EXPECT_EQ(wv.dtype, DType::kF32);
    auto big = std::make_shared<std::vector<float>>(static_cast<const float*>(wv.data),
                                                    static_cast<const float*>(wv.data) + wv.rows * wv.cols);
    for (float& x : *big) x *= k;
    scaled.weights.layers[1].wv.data = big->data();
    auto t = MeasureLayerSensitivity(scaled, *backend, samples, o);
    EXPECT_TRUE(t.ok());
    return *t;
  };
  const std::vector<double> up = with_layer1_values_scaled(8.0f);
  EXPECT_GT(up[1], 1.5 * (*s)[1]);
  const std::vector<double> zero = with_layer1_values_scaled(0.0f);
  EXPECT_EQ(zero[1], 0.0);
  EXPECT_GT(zero[0], 0.0);
}

TEST_F(RippleProfilerTest, ProfilerRejectsSamplesShorterThanTheScoredTokens) {
  auto backend = MakeCpuBackend();
  ProfilerOptions o;
  o.scored_tokens = 64;
  const auto st = MeasureLayerSensitivity(*model_, *backend, Samples(1, 40), o).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("40 tokens"), std::string_view::npos) << st;
}


TEST(RippleValidationTest, SpearmanOnKnownRankings) {
  EXPECT_DOUBLE_EQ(SpearmanRho({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0);
  EXPECT_DOUBLE_EQ(SpearmanRho({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0);
  // Monotone but not linear: still 1.
  EXPECT_DOUBLE_EQ(SpearmanRho({0.1, 0.2, 5, 100}, {1, 2, 3, 4}), 1.0);
  // d = (0, 0, 1, -1): 1 - 6 * 2 / (4 * 15) = 0.8.
  EXPECT_NEAR(SpearmanRho({1, 2, 3, 4}, {1, 2, 4, 3}), 0.8, 1e-12);
  EXPECT_EQ(SpearmanRho({1, 1, 1}, {1, 2, 3}), 0.0);
}

TEST(RippleValidationTest, LayerDamageIsFiniteAndGrowsAsTheLayerKeepsLess) {
  auto model = MakeRandomModel("tiny", 4);
  ASSERT_TRUE(model.ok());
  auto tok = Tokenizer::Create(model->tokenizer);
  ASSERT_TRUE(tok.ok());
  auto corpus = TextCorpus::Load(testing::SourcePath("tests/data/corpus"), *tok);
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  auto backend = MakeCpuBackend();
  LayerDamageOptions o;
  o.context = 300;
  o.continuation = 16;
  o.samples = 1;
  o.layer_budget = 200;
  auto mild = MeasureLayerDamage(*model, *tok, *backend, *corpus, o);
  ASSERT_TRUE(mild.ok()) << mild.status();
  o.layer_budget = 8;
  auto harsh = MeasureLayerDamage(*model, *tok, *backend, *corpus, o);
  ASSERT_TRUE(harsh.ok());
  ASSERT_EQ(harsh->size(), 2u);
  for (size_t l = 0; l < 2; ++l) {
    EXPECT_TRUE(std::isfinite((*harsh)[l]));
    EXPECT_GT((*harsh)[l], (*mild)[l]) << "layer " << l;
  }
}

}  // namespace
}  // namespace kvserve
