// The device path of KV compression, run on the CPU: a backend that says its memory is not
// host memory (but keeps it on the host) sends SequenceCompressor through
// DeviceLayerCompressor and the Backend's compression ops (their CPU references), exactly the
// calls CudaBackend serves on a GPU. It must select and compact as the host path does.
#include "engine/compress/device_compressor.h"

#include <cmath>

#include "engine/compress/basic_policies.h"
#include "engine/compress/compaction.h"
#include "engine/compress/criticalkv_policy.h"
#include "engine/compress/snapkv_scorer.h"
#include "tests/engine/compress/layer_fixture.h"
#include "tests/engine/compress/tiny_generation_fixture.h"

namespace kvserve {
namespace {

// The CPU backend with HostMemory() false: everything a device backend would get, on the host.
class HostAsDeviceBackend final : public Backend {
 public:
  std::string_view Name() const override { return "host-as-device"; }
  bool HostMemory() const override { return false; }
  void Embed(const WeightView& t, const int32_t* tokens, int64_t n, float* out) override { cpu_->Embed(t, tokens, n, out); }
  void RmsNorm(const float* x, const float* g, float* out, int64_t n, int64_t dim, float eps) override {
    cpu_->RmsNorm(x, g, out, n, dim, eps);
  }
  void MatMul(const WeightView& w, const float* x, float* y, int64_t n) override { cpu_->MatMul(w, x, y, n); }
  void AddBias(float* y, const float* b, int64_t n, int64_t dim) override { cpu_->AddBias(y, b, n, dim); }
  void Rope(float* x, const int32_t* pos, int64_t n, int64_t heads, int64_t hd, const float* f, int64_t rot,
            bool neox) override {
    cpu_->Rope(x, pos, n, heads, hd, f, rot, neox);
  }
  void WriteKv(const PagedKv& kv, const AttentionBatch& b, const float* k, const float* v) override {
    cpu_->WriteKv(kv, b, k, v);
  }
  void Attention(const PagedKv& kv, const AttentionBatch& b, const AttentionShape& s, const float* q,
                 float* out) override {
    cpu_->Attention(kv, b, s, q, out);
  }
  void SwiGlu(const float* g, const float* u, float* out, int64_t n) override { cpu_->SwiGlu(g, u, out, n); }
  void Add(float* x, const float* y, int64_t n) override { cpu_->Add(x, y, n); }
  int64_t compression_ops = 0;
  void TopKPerHead(const float* scores, int64_t heads, int64_t len, int64_t k, int32_t* slots) override {
    ++compression_ops;
    Backend::TopKPerHead(scores, heads, len, k, slots);
  }

 private:
  std::unique_ptr<Backend> cpu_ = MakeCpuBackend();
};

TEST(DeviceLayerCompressorTest, CompactsALayerAsTheHostPathDoes) {
  const int64_t len = 70, kvh = 2, group = 2, d = 8, hidden = 16, window_len = 6, k = 23;
  for (const char* policy : {"snapkv", "criticalkv"}) {
    LayerFixture host(len, kvh, d), dev(len, kvh, d);
    host.FillRandom(4);
    dev.FillRandom(4);
    std::mt19937 rng(8);
    std::normal_distribution<float> n(0.0f, 1.0f);
    std::vector<float> window(static_cast<size_t>(window_len * kvh * group * d)), wo(static_cast<size_t>(hidden * kvh * group * d));
    for (float& x : window) x = n(rng);
    for (float& x : wo) x = n(rng);
    CompressionSettings s;
    s.policy = policy;
    auto request = [&](LayerFixture& f) {
      SelectionRequest r;
      r.layer = f.layer();
      r.window = window;
      r.window_len = window_len;
      r.n_heads = kvh * group;
      r.scale = 1.0f / std::sqrt(static_cast<float>(d));
      r.wo = WeightView{DType::kF32, hidden, kvh * group * d, wo.data()};
      r.n_keep = k;
      return r;
    };
    auto cpu = MakeCpuBackend();
    const Selection sel = (*MakeKvPolicy(s))->Select(request(host), *cpu);
    ASSERT_TRUE(CompactLayer(host.pool, host.seq, 0, sel).ok());

    HostAsDeviceBackend backend;
    const std::optional<DeviceSelectionSpec> spec = DeviceSelectionFor(s);
    ASSERT_TRUE(spec.has_value());
    DeviceLayerCompressor compressor(backend, *spec, 1);
    ASSERT_TRUE(compressor.Compress(request(dev), dev.pool, dev.seq, 0).ok());
    EXPECT_GT(backend.compression_ops, 0) << policy;

    ASSERT_EQ(dev.seq.layer_len[0], k) << policy;
    EXPECT_EQ(dev.seq.layer_pages[0], host.seq.layer_pages[0]) << policy;
    EXPECT_EQ(dev.pool.free_pages(), host.pool.free_pages()) << policy;
    const LayerKv a = host.layer(), b = dev.layer();
    for (int64_t i = 0; i < k; ++i) {
      for (int64_t h = 0; h < kvh; ++h) {
        EXPECT_EQ(std::vector<float>(b.Key(i, h), b.Key(i, h) + d), std::vector<float>(a.Key(i, h), a.Key(i, h) + d))
            << policy << " slot " << i << " head " << h;
        EXPECT_EQ(b.LogWeight(i, h), a.LogWeight(i, h));
      }
    }
  }
}

TEST(DeviceLayerCompressorTest, OnlySnapKvScoredPoliciesHaveADeviceForm) {
  for (const char* p : {"snapkv", "pyramid", "criticalkv"}) {
    CompressionSettings s;
    s.policy = p;
    EXPECT_TRUE(DeviceSelectionFor(s).has_value()) << p;
  }
  for (const char* p : {"full", "streaming", "mergereduce:random", "mergereduce:cluster"}) {
    CompressionSettings s;
    s.policy = p;
    EXPECT_FALSE(DeviceSelectionFor(s).has_value()) << p;
  }
  CompressionSettings risk;
  risk.policy = "snapkv";
  risk.auto_risk = 0.1;
  EXPECT_FALSE(DeviceSelectionFor(risk).has_value()) << "auto:RISK reads host pages";
}

class DeviceCompressionGenerationTest : public TinyGenerationTest {};

TEST_F(DeviceCompressionGenerationTest, GeneratesAsTheHostPathDoes) {
  const auto prompt = Prompt(150);
  for (const char* policy : {"snapkv", "criticalkv", "pyramid"}) {
    for (CompressAt at : {CompressAt::kChunk, CompressAt::kPrefillEnd}) {
      CompressionSettings kv;
      kv.policy = policy;
      kv.budget = 40;
      kv.window = 8;
      kv.at = at;
      const GenerationResult host = Run(prompt, kv, 40, /*chunk=*/32, /*page=*/8);
      auto cpu = std::move(backend_);
      auto device = std::make_unique<HostAsDeviceBackend>();
      HostAsDeviceBackend* dev = device.get();
      backend_ = std::move(device);
      const GenerationResult got = Run(prompt, kv, 40, 32, 8);
      backend_ = std::move(cpu);
      const std::string what = std::string(policy) + (at == CompressAt::kChunk ? " chunk" : " prefill_end");
      EXPECT_GT(dev->compression_ops, 0) << what;
      EXPECT_GT(host.compression.evicted_slots, 0) << what;
      EXPECT_EQ(got.compression.evicted_slots, host.compression.evicted_slots) << what;
      EXPECT_EQ(got.compression.compactions, host.compression.compactions) << what;
      EXPECT_EQ(got.kv_slots_at_end, host.kv_slots_at_end) << what;
      EXPECT_EQ(got.tokens, host.tokens) << what;
      ASSERT_EQ(got.step_logits.size(), host.step_logits.size());
      for (size_t i = 0; i < got.step_logits.size(); ++i) {
        for (size_t j = 0; j < got.step_logits[i].size(); ++j) {
          ASSERT_NEAR(got.step_logits[i][j], host.step_logits[i][j], 1e-4) << what << " step " << i;
        }
      }
    }
  }
}

TEST_F(DeviceCompressionGenerationTest, PoliciesWithoutADeviceFormAreRefused) {
  backend_ = std::make_unique<HostAsDeviceBackend>();
  GenerationOptions o;
  o.max_new_tokens = 4;
  o.compression.policy = "streaming";
  o.compression.budget = 40;
  const auto g = Generate(*model_, *tokenizer_, *backend_, Prompt(100), o);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(g.status().message().find("streaming"), std::string::npos) << g.status();
}

}  // namespace
}  // namespace kvserve
