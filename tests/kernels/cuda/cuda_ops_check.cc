// Every CUDA op against the CPU reference on fresh random inputs, and greedy generation CPU
// versus CUDA. Skips, each with "no CUDA device: <reason>", on machines without a GPU (fails
// instead under KVSERVE_REQUIRE_GPU=1).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "engine/generator.h"
#include "engine/model/forward.h"
#include "engine/model/model_loader.h"
#include "engine/model/random_model.h"
#include "engine/model/sampler.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/attention_plan.h"
#include "kernels/backend.h"
#include "kernels/cpu/fp16.h"
#include "kernels/cpu/row_topk.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/cuda_ops.h"
#include "tests/kernels/cuda/cuda_device_test.h"
#include "tests/kernels/cpu/random_blocks.h"

namespace kvserve {
namespace {

using testing::RandomFloats;

class CudaOps : public CudaDeviceTest {
 protected:
  void SetUp() override {
    CudaDeviceTest::SetUp();
    cpu_ = MakeCpuBackend();
  }

  std::unique_ptr<Backend> cpu_;
};

TEST_F(CudaOps, RmsNorm) {
  for (int64_t dim : {576, 4096}) {
    const int64_t n = 7;
    auto x = RandomFloats(n * dim, 1, 3.0f), gain = RandomFloats(dim, 2);
    std::vector<float> want(x.size());
    cpu_->RmsNorm(x.data(), gain.data(), want.data(), n, dim, 1e-5f);
    float* dx = Up(x);
    gpu_->RmsNorm(dx, gain.data(), dx, n, dim, 1e-5f);
    EXPECT_LT(RelError(Down(dx, x.size()), want), 1e-5) << "dim " << dim;
  }
}

TEST_F(CudaOps, RopeIncludingLlama3Scaling) {
  auto config = RandomPresetConfig("llama3-8b");
  ASSERT_TRUE(config.ok());
  const std::vector<float> inv = RopeInverseFrequencies(*config, WeightView{});
  for (bool neox : {true, false}) {
    const int64_t n = 9, heads = 4, hd = 128;
    std::vector<int32_t> pos = {0, 1, 7, 100, 4095, 8191, 8192, 20000, 32767};
    auto x = RandomFloats(n * heads * hd, 3);
    std::vector<float> want = x;
    cpu_->Rope(want.data(), pos.data(), n, heads, hd, inv.data(), hd, neox);
    float* dx = Up(x);
    gpu_->Rope(dx, pos.data(), n, heads, hd, inv.data(), hd, neox);
    EXPECT_LT(RelError(Down(dx, x.size()), want), 2e-5) << "neox " << neox;
  }
}

TEST_F(CudaOps, ElementwiseAndEmbed) {
  const int64_t n = 5, dim = 300;
  auto a = RandomFloats(n * dim, 4, 4.0f), b = RandomFloats(n * dim, 5), bias = RandomFloats(dim, 6);
  std::vector<float> want = a;
  cpu_->Add(want.data(), b.data(), n * dim);
  cpu_->AddBias(want.data(), bias.data(), n, dim);
  cpu_->SwiGlu(want.data(), b.data(), want.data(), n * dim);
  float *da = Up(a), *db = Up(b);
  gpu_->Add(da, db, n * dim);
  gpu_->AddBias(da, bias.data(), n, dim);
  gpu_->SwiGlu(da, db, da, n * dim);
  EXPECT_LT(RelError(Down(da, a.size()), want), 1e-5);

  // Embedding tables are stored as bf16 on the device: bf16 rounding (2^-9 relative).
  auto table = RandomFloats(50 * dim, 7);
  const WeightView tv{DType::kF32, 50, dim, table.data()};
  std::vector<int32_t> tokens = {3, 0, 49, 3, 17};
  std::vector<float> ewant(n * dim);
  cpu_->Embed(tv, tokens.data(), n, ewant.data());
  float* dout = Up(std::vector<float>(n * dim));
  gpu_->Embed(tv, tokens.data(), n, dout);
  EXPECT_LT(RelError(Down(dout, ewant.size()), ewant), 4e-3);
}

TEST_F(CudaOps, MatMulBf16AgainstCpuForEveryWeightType) {
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16, DType::kQ4_0, DType::kQ4_1, DType::kQ8_0}) {
    for (int64_t n : {1, 5, 64}) {
      const int64_t rows = 96, cols = 512;
      std::vector<uint8_t> w;
      if (t == DType::kF32 || t == DType::kBF16 || t == DType::kF16) {
        auto f = RandomFloats(rows * cols, 8, 0.1f);
        w.resize(static_cast<size_t>(RowBytes(t, cols) * rows));
        for (int64_t i = 0; i < rows * cols; ++i) {
          if (t == DType::kF32) {
            reinterpret_cast<float*>(w.data())[i] = f[i];
          } else if (t == DType::kF16) {
            reinterpret_cast<uint16_t*>(w.data())[i] = cpu::FloatToHalf(f[i]);
          } else {
            uint32_t bits;
            std::memcpy(&bits, &f[i], 4);
            reinterpret_cast<uint16_t*>(w.data())[i] = static_cast<uint16_t>(bits >> 16);
          }
        }
      } else {
        w = testing::RandomQuantRows(t, rows, cols, 9);
      }
      const WeightView wv{t, rows, cols, w.data()};
      auto x = RandomFloats(n * cols, 10);
      std::vector<float> want(n * rows);
      cpu_->MatMul(wv, x.data(), want.data(), n);
      float* dx = Up(x);
      float* dy = Up(std::vector<float>(n * rows));
      gpu_->MatMul(wv, dx, dy, n);
      // bf16 activations and weights, fp32 accumulation over 512 terms.
      EXPECT_LT(RelError(Down(dy, want.size()), want), 2e-2) << DTypeName(t) << " n=" << n;
    }
  }
}

// Device greedy against the host Sampler at temperature 0 (the engine's rule), on random rows
// and on rows with ties, NaN, +-inf and nothing but -inf.
TEST_F(CudaOps, ArgmaxOnDeviceMatchesHostGreedy) {
  const int64_t rows = 40, vocab = 128256;
  auto logits = RandomFloats(rows * vocab, 11);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  auto row = [&](int64_t r) { return logits.data() + r * vocab; };
  std::fill(row(32), row(33), -inf);                     // only -inf: token 0
  std::fill(row(33), row(34), nan);                      // only NaN: token 0
  row(34)[0] = nan;                                      // NaN first, a real maximum later
  row(35)[70000] = 5.0f, row(35)[90000] = 5.0f;          // a tie: the lower id
  row(36)[100] = inf, row(36)[50] = std::numeric_limits<float>::max();  // +inf ties FLT_MAX: 50
  row(37)[128255] = 9.0f;                                // the last id
  std::fill(row(38), row(39), 0.0f);                     // all equal: 0
  std::fill(row(39), row(40), -inf), row(39)[4242] = -1e30f;
  std::vector<int32_t> ids(rows);
  CudaArgmaxRows(*gpu_, Up(logits), ids.data(), rows, vocab);
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  for (int64_t r = 0; r < rows; ++r) {
    Sampler sampler(greedy);
    EXPECT_EQ(ids[r], sampler.Sample(absl::MakeConstSpan(row(r), vocab), {})) << "row " << r;
  }
}

// Top-k candidates on the device against cpu::RowTopK, ids and values exactly: smooth rows,
// rows on a coarse grid (ties at every rank, so at the k-th too), rows with -inf, NaN, +inf
// and signed zeros, and rows that are all one value, all -inf or all NaN (every key ties on
// its value, so the id digits decide).
TEST_F(CudaOps, TopKRowsOnDeviceMatchesCpuReference) {
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t vocab : {128256, 49152}) {
    for (int64_t rows : {1, 32}) {
      auto logits = RandomFloats(rows * vocab, static_cast<uint32_t>(vocab + rows), 8.0f);
      for (int64_t r = 0; r < rows; ++r) {
        float* row = logits.data() + r * vocab;
        for (int64_t i = 0; i < vocab; ++i) {
          if (r % 3 == 0) row[i] = std::round(row[i] * 4.0f) / 4.0f;
          if (r % 3 == 2 && i % 11 == 0) row[i] = -inf;
          if (r % 3 == 2 && i % 13 == 0) row[i] = std::nanf("");
          if (r % 3 == 2 && i % 17 == 0) row[i] = i % 2 ? -0.0f : 0.0f;
          if (r == 2 && i % 5000 == 7) row[i] = inf;
          if (r == 4) row[i] = 1.5f;
          if (r == 5) row[i] = -inf;
          if (r == 7) row[i] = std::nanf("");
        }
      }
      const float* dlogits = Up(logits);
      for (int64_t k : {int64_t{1}, int64_t{40}, cuda::kTopKRowsMaxK}) {
        std::vector<int32_t> ids(rows * k), want_ids(rows * k);
        std::vector<float> vals(rows * k), want_vals(rows * k);
        CudaTopKRows(*gpu_, dlogits, rows, vocab, k, ids.data(), vals.data());
        cpu::RowTopK(logits.data(), rows, vocab, k, want_ids.data(), want_vals.data());
        EXPECT_EQ(ids, want_ids) << "rows " << rows << " vocab " << vocab << " k " << k;
        EXPECT_EQ(vals, want_vals) << "rows " << rows << " vocab " << vocab << " k " << k;  // -0.0 == +0.0
      }
    }
  }
}

// One attention case: sequences with (new tokens, cached tokens before them), random page
// order, random log-weights with some -inf (merge-reduce padding).
struct AttnCase {
  int64_t page_size, head_dim, group;
  std::vector<std::pair<int32_t, int32_t>> seqs;  // (n_q, prefix)
};

// The kernel CudaBackend::Attention (kernels/cuda/cuda_backend.cu) runs for one sequence. The
// fast kernels need head_dim and group to suit BOTH the decode and the prefill kernel (head_dim
// 64/128, group <= 8); then a sequence with <= decode_max_queries (8) new tokens takes the fp32
// decode kernel and a longer one the bf16 tensor-core prefill kernel (a batch may mix both).
// Otherwise the whole batch takes the fp32 generic kernel.
enum class AttnPath { kDecodeFp32, kPrefillBf16, kGenericFp32 };

AttnPath AttentionPathOf(int64_t head_dim, int64_t group, int64_t n_q) {
  const bool fast = cuda::DecodeAttentionSupported(head_dim, group) && cuda::PrefillAttentionSupported(head_dim, group);
  if (!fast) return AttnPath::kGenericFp32;
  return n_q <= AttentionPlanOptions{}.decode_max_queries ? AttnPath::kDecodeFp32 : AttnPath::kPrefillBf16;
}

// Bounds on a sequence's RelError (max abs error over max |out| of that sequence's rows): fp32
// kernels against the fp32 CPU math (estimated ~1e-5 even at 32K keys); the bf16 prefill kernel
// rounds Q, K, V and P to bf16 (2^-9 each), ~0.3-0.5% of the sequence's output scale.
double AttentionBound(AttnPath path) { return path == AttnPath::kPrefillBf16 ? 2e-2 : 2e-4; }

const char* AttentionPathName(AttnPath path) {
  switch (path) {
    case AttnPath::kDecodeFp32: return "fp32 decode";
    case AttnPath::kPrefillBf16: return "bf16 prefill";
    case AttnPath::kGenericFp32: return "fp32 generic";
  }
  return "?";
}

// Runs the case on both backends and bounds the error of every sequence on its own, over the
// rows of its query tokens (q_indptr[s]..q_indptr[s+1], all heads): the batch-wide error would
// let a short sequence's large outputs hide a long one's errors (a 1+32767 decode row's
// max |out| is ~0.018 against ~1 for a 1+0 row).
void RunAttention(Backend& cpu, Backend& gpu, const AttnCase& c, uint32_t seed,
                  std::function<float*(const std::vector<float>&)> up,
                  std::function<std::vector<float>(const float*, size_t)> down) {
  const int64_t n_kv = 2, n_heads = n_kv * c.group, hd = c.head_dim, ps = c.page_size;
  std::vector<int32_t> q_indptr = {0}, page_indptr = {0}, page_indices, kv_len;
  int64_t total_pages = 0;
  for (auto [nq, prefix] : c.seqs) total_pages += (nq + prefix + ps - 1) / ps;
  std::vector<int32_t> order(static_cast<size_t>(total_pages));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  size_t next = 0;
  for (auto [nq, prefix] : c.seqs) {
    q_indptr.push_back(q_indptr.back() + nq);
    kv_len.push_back(nq + prefix);
    for (int64_t p = 0; p < (nq + prefix + ps - 1) / ps; ++p) page_indices.push_back(order[next++]);
    page_indptr.push_back(static_cast<int32_t>(page_indices.size()));
  }
  const int64_t n_tok = q_indptr.back();
  const int64_t kv_floats = total_pages * ps * n_kv * hd;
  // The cache before this step: random K/V and log-weights; then WriteKv adds the new rows.
  auto k_pages = RandomFloats(kv_floats, seed + 1), v_pages = RandomFloats(kv_floats, seed + 2);
  auto log_w = RandomFloats(total_pages * ps * n_kv, seed + 3, 2.0f);
  for (size_t i = 0; i < log_w.size(); i += 7) log_w[i] = -std::numeric_limits<float>::infinity();
  auto q = RandomFloats(n_tok * n_heads * hd, seed + 4), k = RandomFloats(n_tok * n_kv * hd, seed + 5),
       v = RandomFloats(n_tok * n_kv * hd, seed + 6);
  const AttentionBatch batch{static_cast<int32_t>(c.seqs.size()), q_indptr.data(), page_indptr.data(),
                             page_indices.data(), kv_len.data()};
  const AttentionShape shape{n_heads, 1.0f / std::sqrt(static_cast<float>(hd))};

  PagedKv host{k_pages.data(), v_pages.data(), log_w.data(), ps, n_kv, hd};
  PagedKv dev{up(k_pages), up(v_pages), up(log_w), ps, n_kv, hd};
  std::vector<float> want(n_tok * n_heads * hd);
  cpu.WriteKv(host, batch, k.data(), v.data());
  cpu.Attention(host, batch, shape, q.data(), want.data());
  float* dout = up(std::vector<float>(want.size()));
  gpu.WriteKv(dev, batch, up(k), up(v));
  gpu.Attention(dev, batch, shape, up(q), dout);
  EXPECT_EQ(down(static_cast<const float*>(dev.k), k_pages.size()), k_pages) << "WriteKv K";
  EXPECT_EQ(down(static_cast<const float*>(dev.v), v_pages.size()), v_pages) << "WriteKv V";
  EXPECT_EQ(down(dev.log_w, log_w.size()), log_w) << "WriteKv log_w";
  const std::vector<float> got = down(dout, want.size());
  const std::string desc = "page_size " + std::to_string(ps) + " head_dim " + std::to_string(hd) + " group " +
                           std::to_string(c.group);
  std::string errors;
  const size_t row = static_cast<size_t>(n_heads * hd);
  for (size_t s = 0; s < c.seqs.size(); ++s) {
    const auto [nq, prefix] = c.seqs[s];
    const AttnPath path = AttentionPathOf(hd, c.group, nq);
    const double err = RelError(got, want, q_indptr[s] * row, q_indptr[s + 1] * row);
    char seq[64];  // (new tokens+cached tokens)
    std::snprintf(seq, sizeof(seq), "(%d+%d)", nq, prefix);
    EXPECT_LT(err, AttentionBound(path)) << desc << ": sequence " << s << " " << seq << " on the "
                                         << AttentionPathName(path) << " kernel";
    char e[96];
    std::snprintf(e, sizeof(e), " %s %s %.1e", seq, path == AttnPath::kPrefillBf16 ? "bf16" : "fp32", err);
    errors += e;
  }
  std::printf("attention %s:%s\n", desc.c_str(), errors.c_str());
}

TEST_F(CudaOps, PagedAttentionSweep) {
  auto up = [&](const std::vector<float>& h) { return Up(h); };
  auto down = [&](const float* p, size_t n) { return Down(p, n); };
  uint32_t seed = 100;
  for (int64_t ps : {16, 32, 64}) {
    for (int64_t hd : {64, 128}) {
      for (int64_t group : {1, 4, 8}) {
        // Decode (flash-decoding, fp32): batch of variable lengths, 1 to 32K.
        RunAttention(*cpu_, *gpu_, {ps, hd, group, {{1, 0}, {1, 16}, {1, 999}, {1, 5000}, {1, 32767}}}, seed++, up,
                     down);
        // Prefill (bf16 tensor cores): a chunk after a paged prefix and a first chunk.
        RunAttention(*cpu_, *gpu_, {ps, hd, group, {{300, 0}, {130, 2000}}}, seed++, up, down);
        // A mixed batch: the 1-token rows take the fp32 decode kernel, 77 and 9 (> 8) new tokens
        // the bf16 prefill kernel.
        RunAttention(*cpu_, *gpu_, {ps, hd, group, {{1, 700}, {77, 40}, {1, 3}, {9, 0}}}, seed++, up, down);
      }
    }
  }
}

TEST_F(CudaOps, PagedAttentionLongPrefillAndOddShapes) {
  auto up = [&](const std::vector<float>& h) { return Up(h); };
  auto down = [&](const float* p, size_t n) { return Down(p, n); };
  // A 1K chunk at the end of a 31K prefix (32K total): bf16 prefill.
  RunAttention(*cpu_, *gpu_, {16, 128, 4, {{1024, 31 * 1024}}}, 7, up, down);
  // SmolLM2's group of 3 and a group of 5 (fast kernels: the 1-token rows fp32 decode, the
  // 40- and 20-token ones bf16 prefill).
  RunAttention(*cpu_, *gpu_, {16, 64, 3, {{1, 1000}, {40, 100}}}, 8, up, down);
  RunAttention(*cpu_, *gpu_, {32, 128, 5, {{1, 3000}, {20, 10}}}, 10, up, down);
  // random:tiny's head_dim 16 and a group of 80 (> 8: no decode kernel): the generic fp32
  // kernel for the whole batch, prefill rows included.
  RunAttention(*cpu_, *gpu_, {16, 16, 2, {{1, 1000}, {40, 100}}}, 9, up, down);
  RunAttention(*cpu_, *gpu_, {16, 64, 80, {{1, 500}, {20, 10}}}, 11, up, down);
  // Multi-token decode (2..8 new tokens take the fp32 decode kernel) and odd groups at head_dim 64.
  RunAttention(*cpu_, *gpu_, {16, 64, 6, {{2, 900}, {8, 33}, {5, 0}}}, 12, up, down);
  RunAttention(*cpu_, *gpu_, {64, 64, 7, {{3, 4000}, {1, 1}}}, 13, up, down);
}

// Greedy generation on both backends. The CUDA path runs bf16 GEMMs, so two tokens whose
// logits nearly tie may swap; a divergence passes only when the CPU logits of the two tokens
// differ by less than 2% of the row's range.
void CompareGreedy(const Model& model, const std::vector<int32_t>& prompt, int32_t n_new) {
  auto tokenizer = Tokenizer::Create(model.tokenizer);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  GenerationOptions o;
  o.max_new_tokens = n_new;
  o.ignore_eos = true;
  o.prefill_chunk = 64;
  auto cpu = MakeCpuBackend();
  auto gpu = MakeCudaBackend(0);
  auto a = Generate(model, *tokenizer, *cpu, prompt, o, {}, /*keep_logits=*/true);
  auto b = Generate(model, *tokenizer, *gpu, prompt, o);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  size_t same = 0;
  while (same < a->tokens.size() && same < b->tokens.size() && a->tokens[same] == b->tokens[same]) ++same;
  std::printf("greedy %s: %zu of %zu tokens identical (cpu prefill %.3f s, cuda prefill %.3f s)\n",
              model.source.c_str(), same, a->tokens.size(), a->prefill_seconds, b->prefill_seconds);
  if (same < a->tokens.size()) {
    const std::vector<float>& row = a->step_logits[same];
    const auto [lo, hi] = std::minmax_element(row.begin(), row.end());
    const float margin = row[a->tokens[same]] - row[b->tokens[same]];
    EXPECT_LT(margin, 0.02f * (*hi - *lo)) << "first divergence at token " << same << " is not a near-tie";
  }
}

TEST_F(CudaOps, GreedyGenerationRandomTiny) {
  auto model = MakeRandomModel("tiny", 1);
  ASSERT_TRUE(model.ok());
  std::vector<int32_t> prompt;
  for (int i = 0; i < 200; ++i) prompt.push_back((i * 37 + 5) % 500);
  CompareGreedy(*model, prompt, 48);
}

// SmolLM2-135M's shape with random weights (head_dim 64, 9 heads over 3 KV heads: a group of
// 3, 30 layers, vocab 49152), so the shape is covered where the model file is not (the GPU
// machine). 200 prompt tokens in chunks of 64: the last chunk of 8 takes the decode kernel.
TEST_F(CudaOps, GreedyGenerationRandomSmolLM2Shape) {
  auto model = MakeRandomModel("smollm2-135m", 1);
  ASSERT_TRUE(model.ok()) << model.status();
  CompareGreedy(*model, RandomModelPrompt(model->config.vocab_size, 200), 32);
}

// The real SmolLM2 when its file is there (scripts/fetch-model.sh); the random-weight test
// above covers its shape otherwise.
TEST_F(CudaOps, GreedyGenerationSmolLM2) {
  const char* path = std::getenv("KVSERVE_SMOLLM2_GGUF");
  if (!path || !std::filesystem::exists(path)) {
    GTEST_SKIP() << "SmolLM2 model file not found (" << (path ? path : "KVSERVE_SMOLLM2_GGUF unset")
                 << "); run scripts/fetch-model.sh (GreedyGenerationRandomSmolLM2Shape covers its shape)";
  }
  auto model = LoadModel(path);
  ASSERT_TRUE(model.ok()) << model.status();
  auto tokenizer = Tokenizer::Create(model->tokenizer);
  ASSERT_TRUE(tokenizer.ok());
  std::vector<int32_t> prompt = tokenizer->Encode(
      "The history of the city begins in the early medieval period, when a small settlement grew up", true, true);
  CompareGreedy(*model, prompt, 32);
}

}  // namespace
}  // namespace kvserve
