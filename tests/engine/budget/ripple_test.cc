// RippleKV online: plan arithmetic on known inputs, the profile file's round trip and model
// check, and the plan's pages in the pool. The profiler's tests are in tests/engine/offline/.
#include <cmath>
#include <cstdio>
#include <numeric>

#include "engine/budget/ripple_plan.h"
#include "engine/budget/ripple_profile.h"
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
  s.plan = BudgetPlan::kRipple;
  s.budget = 64;
  EXPECT_EQ(ValidateCompressionSettings(s, 2).code(), absl::StatusCode::kInvalidArgument) << "no profile loaded";
  auto p = std::make_shared<RippleProfile>(Sample());
  p->sensitivity = {0.0, 1.0};
  s.ripple = p;
  s.ripple_params = {2, 4};
  ASSERT_TRUE(ValidateCompressionSettings(s, 2).ok());
  // weights 1, 2 -> 128 tokens = 8 pages split 8/3, 16/3 -> 3 and 5 pages.
  EXPECT_EQ(QuotasFor(BudgetOf(s), 2, 1000, 16), (std::vector<int64_t>{48, 80}));
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
  s.plan = BudgetPlan::kRipple;
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
