// RippleKV: plan arithmetic on known inputs, the profile file's round trip and model check,
// and the profiler on the tiny random model.
#include <cmath>
#include <cstdio>
#include <numeric>

#include "engine/budget/ripple_plan.h"
#include "engine/budget/ripple_profile.h"
#include "engine/budget/ripple_profiler.h"
#include "engine/budget/ripple_validation.h"
#include "engine/model/tokenizer.h"
#include "tests/test_paths.h"
#include "engine/compress/compression_settings.h"
#include "engine/compress/sequence_compressor.h"
#include "engine/model/forward.h"
#include "engine/model/model_loader.h"
#include "gtest/gtest.h"

namespace kvserve {
namespace {

int64_t Sum(const std::vector<int64_t>& v) { return std::accumulate(v.begin(), v.end(), int64_t{0}); }

TEST(RipplePlanTest, WeightsFollowRToTheNormalizedSensitivityAndClip) {
  // s normalized: 0, 0.5, 1 -> 4^s = 1, 2, 4; gamma 3 clips the top to 3.
  const std::vector<double> w = RippleWeights({0.2, 0.6, 1.0}, {4.0, 3.0});
  EXPECT_DOUBLE_EQ(w[0], 1.0);
  EXPECT_DOUBLE_EQ(w[1], 2.0);
  EXPECT_DOUBLE_EQ(w[2], 3.0);
  EXPECT_EQ(RippleWeights({5, 5, 5}, {8, 4}), std::vector<double>(3, 1.0)) << "no spread: uniform";
}

TEST(RipplePlanTest, QuotasKeepTheTotalAndRoundToWholePages) {
  const std::vector<double> s = {0.0, 0.1, 0.9, 0.3, 1.0, 0.05};
  for (int64_t budget : {64, 100, 333, 1000}) {
    const std::vector<int64_t> q = RippleQuotas(s, {8, 4}, budget, 16);
    const int64_t pages = std::llround(budget * 6 / 16.0);
    EXPECT_EQ(Sum(q), pages * 16) << "budget " << budget;
    for (int64_t v : q) {
      EXPECT_EQ(v % 16, 0);
      EXPECT_GE(v, 16);
    }
    EXPECT_GT(q[4], q[0]) << "the most sensitive layer keeps more";
    EXPECT_GT(q[2], q[3]);
  }
  // Exact shares where rounding is not in the way: weights 1, 2, 1 (r = 2, s = 0, 1, 0).
  EXPECT_EQ(RippleQuotas({0, 1, 0}, {2, 4}, 64, 16), (std::vector<int64_t>{48, 96, 48}));
}

TEST(RipplePlanTest, EveryLayerKeepsAPageEvenAtTinyBudgets) {
  const std::vector<int64_t> q = RippleQuotas({0, 0, 0, 1}, {100, 100}, 4, 16);
  EXPECT_EQ(q.size(), 4u);
  for (int64_t v : q) EXPECT_GE(v, 16);
  EXPECT_EQ(Sum(q), 4 * 16);
}

class RippleProfileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = MakeRandomModel("tiny", 1);
    ASSERT_TRUE(m.ok());
    model_ = std::make_unique<Model>(*std::move(m));
    // One file per test: ctest runs the tests of this fixture in parallel processes.
    path_ = ::testing::TempDir() + "/ripple_profile_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".json";
  }
  RippleProfile Sample() const {
    RippleProfile p;
    p.architecture = model_->config.architecture;
    p.n_layers = model_->config.n_layers;
    p.n_heads = model_->config.n_heads;
    p.n_kv_heads = model_->config.n_kv_heads;
    p.head_dim = model_->config.head_dim;
    p.fingerprint = ModelFingerprint(*model_);
    p.calibration_files = {"a.txt", "b.txt"};
    p.samples = 4;
    p.max_tokens = 128;
    p.scored_tokens = 16;
    p.perturbation_scale = 0.5;
    p.seed = 3;
    p.sensitivity = {0.25, 0.0625};
    return p;
  }
  std::unique_ptr<Model> model_;
  std::string path_;
};

TEST_F(RippleProfileTest, RoundTrips) {
  const RippleProfile p = Sample();
  ASSERT_TRUE(SaveRippleProfile(p, path_).ok());
  auto q = LoadRippleProfile(path_);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->fingerprint, p.fingerprint);
  EXPECT_EQ(q->sensitivity, p.sensitivity);
  EXPECT_EQ(q->calibration_files, p.calibration_files);
  EXPECT_EQ(q->seed, 3u);
  EXPECT_TRUE(CheckProfileMatchesModel(*q, *model_).ok());
}

TEST_F(RippleProfileTest, AProfileForAnotherModelIsRefused) {
  ASSERT_TRUE(SaveRippleProfile(Sample(), path_).ok());
  auto other = MakeRandomModel("smollm2-135m", 1);
  ASSERT_TRUE(other.ok());
  auto p = LoadRippleProfile(path_);
  ASSERT_TRUE(p.ok());
  const absl::Status st = CheckProfileMatchesModel(*p, *other);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(st.message().find("another model"), std::string_view::npos) << st;
  // Same shapes, other weights: the fingerprint still differs.
  auto reseeded = MakeRandomModel("tiny", 2);
  ASSERT_TRUE(reseeded.ok());
  EXPECT_FALSE(CheckProfileMatchesModel(*p, *reseeded).ok());
}

TEST_F(RippleProfileTest, BadFilesNameTheProblem) {
  {
    std::FILE* f = std::fopen(path_.c_str(), "w");
    std::fputs("{\"format\": \"kvserve-ripple-profile/1\", \"model\": {}}", f);
    std::fclose(f);
  }
  auto p = LoadRippleProfile(path_);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find(path_), std::string_view::npos);
  RippleProfile neg = Sample();
  neg.sensitivity[1] = -1;
  ASSERT_TRUE(SaveRippleProfile(neg, path_).ok());
  EXPECT_NE(LoadRippleProfile(path_).status().message().find("sensitivity[1]"), std::string_view::npos);
  EXPECT_EQ(LoadRippleProfile("/nonexistent/p.json").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(RippleProfileTest, RipplePlanDrivesTheQuotas) {
  CompressionSettings s;
  s.policy = "snapkv";
  s.plan = "ripple";
  s.budget = 64;
  EXPECT_EQ(ValidateCompressionSettings(s, 2).code(), absl::StatusCode::kInvalidArgument) << "no profile loaded";
  auto p = std::make_shared<RippleProfile>(Sample());
  p->sensitivity = {0.0, 1.0};
  s.ripple = p;
  s.ripple_params = {2, 4};
  ASSERT_TRUE(ValidateCompressionSettings(s, 2).ok());
  // weights 1, 2 -> 128 tokens = 8 pages split 8/3, 16/3 -> 3 and 5 pages.
  EXPECT_EQ(QuotasFor(s, 2, 1000, 16), (std::vector<int64_t>{48, 80}));
}

std::vector<std::vector<int32_t>> Samples(int n, int len) {
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> t;
    for (int j = 0; j < len; ++j) t.push_back((j * 31 + i * 7 + 3) % 500);
    out.push_back(t);
  }
  return out;
}

TEST_F(RippleProfileTest, ProfilerGivesFiniteScoresThatRespondToALayersValues) {
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

TEST_F(RippleProfileTest, ProfilerRejectsSamplesShorterThanTheScoredTokens) {
  auto backend = MakeCpuBackend();
  ProfilerOptions o;
  o.scored_tokens = 64;
  const auto st = MeasureLayerSensitivity(*model_, *backend, Samples(1, 40), o).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("40 tokens"), std::string_view::npos) << st;
}

}  // namespace
}  // namespace kvserve

namespace kvserve {
namespace {

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

namespace kvserve {
namespace {

TEST(RipplePagesTest, PagesPerLayerFollowThePlanInThePoolAndInAdmission) {
  auto model = MakeRandomModel("tiny", 6);
  ASSERT_TRUE(model.ok());
  const ModelConfig& c = model->config;
  auto profile = std::make_shared<RippleProfile>();
  profile->n_layers = c.n_layers;
  profile->sensitivity = {0.0, 1.0};  // layer 1 is the sensitive one
  CompressionSettings s;
  s.policy = "snapkv";
  s.plan = "ripple";
  s.ripple = profile;
  s.ripple_params = {4, 4};
  s.budget = 64;
  s.window = 8;
  const int64_t ps = 16, prompt_len = 300;
  auto comp = SequenceCompressor::Create(*model, s, prompt_len, 8, ps, 512);
  ASSERT_TRUE(comp.ok()) << comp.status();
  // Weights 1 and 4: 8 pages split 1.6 / 6.4 -> 2 and 6 pages.
  ASSERT_EQ((*comp)->quotas(), (std::vector<int64_t>{32, 96}));
  // Admission: decode peak is quota + one page per layer.
  EXPECT_EQ((*comp)->DecodePeakPages(), (32 + 16) / 16 + (96 + 16) / 16);

  auto backend = MakeCpuBackend();
  PagePool pool({(*comp)->PeakPages(), ps, c.n_kv_heads, c.head_dim});
  SequenceKv seq(c.n_layers);
  LlamaForward fwd(*model, *backend, pool);
  std::vector<int32_t> prompt;
  for (int64_t i = 0; i < prompt_len; ++i) prompt.push_back(static_cast<int32_t>((i * 13 + 5) % 500));
  std::vector<float> logits;
  ForwardRequest req{prompt, 0, &seq, false, (*comp)->window()};
  ASSERT_TRUE(fwd.Step({&req, 1}, &logits).ok());
  ASSERT_TRUE((*comp)->AfterStep(*backend, pool, seq, true).ok());
  EXPECT_EQ(seq.layer_pages[0].size(), 2u);
  EXPECT_EQ(seq.layer_pages[1].size(), 6u);
  EXPECT_EQ(pool.stats().pages_used, 8);
  seq.Release(pool);
}

}  // namespace
}  // namespace kvserve
