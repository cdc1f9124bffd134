// KV compression over a pool in device memory, run on the CPU: a backend that says its memory
// is not host memory (but keeps it on the host) sends SequenceCompressor through the same
// LayerCompressor and Backend compression ops as the CPU backend, with every copy a device
// pool needs, exactly the calls CudaBackend serves on a GPU. It must select and compact as a
// host pool does, and refuse the policies that read pages on the host.
#include "engine/compress/layer_compressor.h"

#include <cmath>

#include "engine/compress/compaction.h"
#include "engine/compress/device_form.h"
#include "tests/engine/compress/layer_fixture.h"
#include "tests/engine/compress/tiny_generation_fixture.h"
#include "tests/kernels/host_as_device_backend.h"

namespace kvserve {
namespace {

TEST(LayerCompressorTest, CompactsADevicePoolAsAHostPool) {
  const int64_t len = 70, kvh = 2, group = 2, d = 8, hidden = 16, window_len = 6, k = 23;
  // probe 5: the last 5 slots are a question probe's, scored with but never kept; keep_first 4:
  // the first 4 slots forced (--sink-tokens), written into the scores in backend memory.
  for (const int64_t probe : {0, 5})
  for (const int64_t keep_first : {0, 4})
  for (const char* policy : {"snapkv", "criticalkv", "streaming"}) {
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
      SelectionRequest r = f.Request(window, window_len, kvh * group, wo, k);
      r.probe_slots = probe;
      r.keep_first = keep_first;
      return r;
    };
    auto cpu = MakeCpuBackend();
    const Selection sel = (*MakeKvPolicy(s))->Select(request(host), *cpu);
    ASSERT_TRUE(CompactLayer(*cpu, host.pool, host.seq, 0, sel).ok());
    for (int32_t slot : sel.slots) ASSERT_LT(slot, len - probe) << policy << ": a probe slot was kept";
    for (int64_t h = 0; h < kvh; ++h) {
      for (int64_t i = 0; i < keep_first; ++i) ASSERT_EQ(sel.slots[h * k + i], i) << policy;
    }

    HostAsDeviceBackend backend;
    ASSERT_TRUE(HasDeviceForm(s));
    const std::unique_ptr<KvPolicy> p = *MakeKvPolicy(s);
    LayerCompressor compressor(backend, dynamic_cast<const ScoringPolicy&>(*p), 1);
    CompressionStats stats;
    ASSERT_TRUE(compressor.Compress(request(dev), dev.pool, dev.seq, 0, &stats).ok());
    EXPECT_EQ(stats.compactions, 1);
    EXPECT_EQ(stats.evicted_slots, len - probe - k);
    EXPECT_GT(backend.compression_ops, 0) << policy;

    ASSERT_EQ(dev.seq.layer_len[0], k) << policy;
    EXPECT_EQ(dev.seq.layer_pages[0], host.seq.layer_pages[0]) << policy;
    EXPECT_EQ(dev.pool.free_pages(), host.pool.free_pages()) << policy;
    const LayerKv a = host.layer(), b = dev.layer();
    for (int64_t i = 0; i < k; ++i) {
      for (int64_t h = 0; h < kvh; ++h) {
        EXPECT_EQ(b.Key(i, h), a.Key(i, h))
            << policy << " slot " << i << " head " << h;
        EXPECT_EQ(b.LogWeight(i, h), a.LogWeight(i, h));
      }
    }
  }
}

TEST(LayerCompressorTest, OnlyPoliciesThatReadNoHostPageHaveADeviceForm) {
  for (const char* p : {"full", "snapkv", "pyramid", "criticalkv", "streaming"}) {
    CompressionSettings s;
    s.policy = p;
    EXPECT_TRUE(HasDeviceForm(s)) << p;
    EXPECT_TRUE(CheckDeviceForm(s, "cuda").ok()) << p;
  }
  for (const char* p : {"keydiff", "mergereduce:random", "mergereduce:cluster"}) {
    CompressionSettings s;
    s.policy = p;
    EXPECT_FALSE(HasDeviceForm(s)) << p;
    EXPECT_EQ(CheckDeviceForm(s, "cuda").code(), absl::StatusCode::kInvalidArgument) << p;
  }
  CompressionSettings risk;
  risk.policy = "snapkv";
  risk.auto_risk = 0.1;
  EXPECT_FALSE(HasDeviceForm(risk)) << "auto:RISK reads host pages";
  EXPECT_NE(CheckDeviceForm(risk, "cuda").message().find("auto:0.1"), std::string::npos);
}

TEST(LayerCompressorTest, WeightedSelectionsFromTheHostGatherOnADevicePool) {
  // A merge-reduce style selection (new log-weights) applied to a pool in "device" memory
  // through Backend::CompactKv, against CompactLayer on the same data in a host pool.
  const int64_t len = 37, heads = 2, d = 4, ps = 4, n = 10;
  HostAsDeviceBackend backend;
  PagePool host({12, ps, heads, d}), dev({12, ps, heads, d}, &backend);
  ASSERT_FALSE(dev.host_memory());
  SequenceKv a(1), b(1);
  ASSERT_TRUE(a.GrowLayer(host, 0, len).ok());
  ASSERT_TRUE(b.GrowLayer(dev, 0, len).ok());
  a.layer_len[0] = b.layer_len[0] = len;
  ASSERT_EQ(a.layer_pages[0], b.layer_pages[0]);
  std::mt19937 rng(12);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t floats = 12 * ps * heads * d;
  for (PagePool* p : {&host, &dev}) {
    rng.seed(12);
    const PagedKv kv = p->view();
    for (int64_t i = 0; i < floats; ++i) {
      static_cast<float*>(kv.k)[i] = normal(rng);
      static_cast<float*>(kv.v)[i] = normal(rng);
    }
    for (int64_t i = 0; i < floats / d; ++i) kv.log_w[i] = normal(rng);
  }
  Selection sel;
  sel.n_keep = n;
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < n; ++i) {
      sel.slots.push_back(static_cast<int32_t>(i * 3 + h));
      sel.log_w.push_back(-0.5f * static_cast<float>(i) + static_cast<float>(h));
    }
  }
  ASSERT_TRUE(CompactLayer(*MakeCpuBackend(), host, a, 0, sel).ok());
  ASSERT_TRUE(CompactLayer(backend, dev, b, 0, sel).ok());
  EXPECT_EQ(b.layer_len[0], n);
  EXPECT_EQ(b.layer_pages[0], a.layer_pages[0]);
  EXPECT_EQ(dev.free_pages(), host.free_pages());
  const LayerKv la{host.view(), a.layer_pages[0], n}, lb{dev.view(), b.layer_pages[0], n};
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t h = 0; h < heads; ++h) {
      EXPECT_EQ(lb.LogWeight(i, h), sel.log_w[h * n + i]);
      for (int64_t e = 0; e < d; ++e) {
        EXPECT_EQ(lb.Key(i, h)[e], la.Key(i, h)[e]);
        EXPECT_EQ(lb.Value(i, h)[e], la.Value(i, h)[e]);
      }
    }
  }
  // A bad selection changes nothing on either kind of pool.
  Selection bad = sel;
  bad.slots[1] = bad.slots[0];
  EXPECT_EQ(CompactLayer(backend, dev, b, 0, bad).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(b.layer_len[0], n);
}

class DeviceCompressionGenerationTest : public TinyGenerationTest {};

TEST_F(DeviceCompressionGenerationTest, GeneratesAsTheHostPathDoes) {
  const auto prompt = Prompt(150);
  for (const char* policy : {"snapkv", "criticalkv", "pyramid", "streaming"}) {
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
      // Read before the device backend is replaced (and destroyed) below.
      const int64_t device_ops = dev->compression_ops;
      backend_ = std::move(cpu);
      const std::string what = std::string(policy) + (at == CompressAt::kChunk ? " chunk" : " prefill_end");
      EXPECT_GT(device_ops, 0) << what;
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
  o.compression.policy = "keydiff";
  o.compression.budget = 40;
  const auto g = Generate(*model_, *tokenizer_, *backend_, Prompt(100), o);
  ASSERT_FALSE(g.ok());
  // The server's answer (Generate is a one-request scheduler run): the request is refused
  // before any prefill, naming the policy.
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(g.status().message().find("KV policy keydiff has no device form"), std::string::npos) << g.status();
}

}  // namespace
}  // namespace kvserve
