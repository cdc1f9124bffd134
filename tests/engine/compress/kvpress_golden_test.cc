// Our SnapKV and CriticalKV keep the same entries as NVIDIA kvpress (0.5.5, run through
// transformers on the same SmolLM2 GGUF) per (layer, KV head): mean Jaccard >= 0.95.
// Golden data: tests/golden/make_kvpress_golden.py. kvpress scores every layer from the
// full prefill (compression does not change that forward pass), so we do the same: one
// full-cache prefill recording each layer's last 64 queries, then select per layer. Run with
// f16 K/V (the CPU default: the keys scored are rounded to fp16) and with f32, to the same bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>

#include "engine/compress/compression_settings.h"
#include "engine/model/forward.h"
#include "engine/model/model_loader.h"
#include "nlohmann/json.hpp"
#include "tests/test_paths.h"

namespace kvserve {
namespace {

double Jaccard(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  std::vector<int32_t> both;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(both));
  const double uni = static_cast<double>(a.size() + b.size() - both.size());
  return uni == 0 ? 1.0 : static_cast<double>(both.size()) / uni;
}

class KvpressGolden : public ::testing::TestWithParam<DType> {};

TEST_P(KvpressGolden, SnapKvAndCriticalKvKeepWhatKvpressKeeps) {
  const DType kv_dtype = GetParam();
  auto model = LoadGgufModel(testing::SmolLm2Path());
  ASSERT_TRUE(model.ok()) << model.status();
  std::ifstream in(testing::SourcePath("tests/golden/kvpress/selection_smollm2.json"));
  ASSERT_TRUE(in) << "golden file missing";
  const nlohmann::json golden = nlohmann::json::parse(in);
  const ModelConfig& c = model->config;
  ASSERT_EQ(golden["n_layers"].get<int64_t>(), c.n_layers);
  const int64_t window = golden["window_size"].get<int64_t>();
  auto backend = MakeCpuBackend();

  for (const auto& prompt : golden["prompts"]) {
    const std::string name = prompt["name"].get<std::string>();
    const std::vector<int32_t> ids = prompt["token_ids"].get<std::vector<int32_t>>();
    const int64_t n = static_cast<int64_t>(ids.size());
    PagePool pool({(n / 16 + 1) * c.n_layers, 16, c.n_kv_heads, c.head_dim, kv_dtype});
    SequenceKv seq(c.n_layers);
    QueryWindow queries(c.n_layers, window, c.n_heads, c.head_dim);
    LlamaForward fwd(*model, *backend, pool);
    std::vector<float> logits;
    ForwardRequest req{ids, 0, &seq, false, &queries};
    ASSERT_TRUE(fwd.Step({&req, 1}, &logits).ok());
    if (prompt.contains("full_cache_greedy_next_token")) {
      const int32_t ours = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      EXPECT_EQ(ours, prompt["full_cache_greedy_next_token"].get<int32_t>()) << name << ": same model, same argmax";
    }

    for (const auto& tc : golden["cases"]) {
      if (tc["prompt_name"] != name) continue;
      CompressionSettings s;
      s.policy = tc["press"].get<std::string>();
      s.window = window;
      s.pool_kernel = golden["kernel_size"].get<int64_t>();
      s.first_stage_ratio = golden["first_stage_ratio"].get<double>();
      auto policy = MakeKvPolicy(s);
      ASSERT_TRUE(policy.ok()) << policy.status();
      const int64_t n_keep = tc["n_kept"].get<int64_t>();
      double sum = 0, worst = 1;
      int pairs = 0;
      std::vector<float> window_rows;
      for (int64_t l = 0; l < c.n_layers; ++l) {
        queries.CopyOrdered(l, &window_rows);
        SelectionRequest r;
        r.layer = LayerKv{pool.view(), seq.layer_pages[l], seq.layer_len[l]};
        r.window = window_rows;
        r.window_len = queries.size(l);
        r.n_heads = c.n_heads;
        r.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
        r.wo = model->weights.layers[l].wo;
        r.n_keep = n_keep;
        const Selection sel = (*policy)->Select(r, *backend);
        for (int64_t h = 0; h < c.n_kv_heads; ++h) {
          const std::vector<int32_t> ours(sel.slots.begin() + h * n_keep, sel.slots.begin() + (h + 1) * n_keep);
          const double j = Jaccard(ours, tc["kept"][l][h].get<std::vector<int32_t>>());
          sum += j;
          worst = std::min(worst, j);
          ++pairs;
        }
      }
      const double mean = sum / pairs;
      std::printf("kvpress %-10s %-14s %s K/V ratio %.1f keep %4lld: mean Jaccard %.4f, worst (layer, head) %.4f\n",
                  s.policy.c_str(), name.c_str(), std::string(DTypeName(kv_dtype)).c_str(),
                  tc["compression_ratio"].get<double>(),
                  static_cast<long long>(n_keep), mean, worst);
      EXPECT_GE(mean, 0.95) << s.policy << " on " << name << " at ratio " << tc["compression_ratio"];
    }
    seq.Release(pool);
  }
}

INSTANTIATE_TEST_SUITE_P(KvDTypes, KvpressGolden, ::testing::Values(DType::kF16, DType::kF32),
                         [](const ::testing::TestParamInfo<DType>& info) { return std::string(DTypeName(info.param)); });

}  // namespace
}  // namespace kvserve
