// The GPU timing table of tests/kernels/cuda/run_checks.sh: each kernel against a ceiling measured in
// the same run (device-to-device copy bandwidth for decode attention, a cuBLAS bf16 GEMM for
// prefill attention), device vs host greedy and top-k sampling, and end-to-end TTFT / decode
// tokens/s on random:llama3-8b. `--e2e-json FILE` also writes the end-to-end numbers for the
// transformers peer (tests/kernels/cuda/hf_peer.py). Prints "no CUDA device: ..." and exits 0 without a
// GPU (1 when KVSERVE_REQUIRE_GPU=1 says there must be one); exits 1 when the two top-k
// sampling paths draw different tokens or the end-to-end part fails.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "engine/kv/page_pool.h"
#include "engine/model/forward.h"
#include "engine/model/model_loader.h"
#include "engine/model/sampler.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/gemm.h"
#include "tests/kernels/cuda/cuda_timer.h"
#include "tests/kernels/cuda/require_gpu.h"

namespace kvserve {
namespace {

// Median milliseconds per call of fn on stream over `reps` samples of `calls` back-to-back
// calls each, after one warm-up call (tests/kernels/cuda/cuda_timer.h).
double TimeMs(cudaStream_t stream, int reps, const std::function<void()>& fn, int calls = 1) {
  return CudaTimeMs(stream, reps, fn, calls);
}

// Back-to-back calls per timing sample of the attention rows: one call's host work (planning,
// metadata upload) then overlaps the device work of the previous one, as in a layer loop, and
// is not counted whole against a 63 us kernel.
constexpr int kAttnCalls = 20, kAttnPrefillCalls = 10;

// n uniform [-1, 1) floats at p, from a host block of at most 16M values uploaded repeatedly.
void FillRandomF32(Backend& gpu, float* p, int64_t n, uint32_t seed) {
  std::vector<float> block(static_cast<size_t>(std::min<int64_t>(n, int64_t{1} << 24)));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& x : block) x = u(rng);
  for (int64_t off = 0; off < n; off += static_cast<int64_t>(block.size())) {
    gpu.CopyIn(p + off, block.data(), 4 * std::min<int64_t>(static_cast<int64_t>(block.size()), n - off));
  }
  KVSERVE_CUDA_CHECK(cudaStreamSynchronize(CudaBackendStream(gpu)));  // block is freed on return
}

// n bf16 values, uniform [-1, 1) rounded to nearest, at p (same blocks as FillRandomF32):
// cuBLAS on zero-filled inputs runs ~13% faster than on real data and would inflate the ceiling.
void FillRandomBf16(Backend& gpu, __nv_bfloat16* p, int64_t n, uint32_t seed) {
  std::vector<uint16_t> block(static_cast<size_t>(std::min<int64_t>(n, int64_t{1} << 24)));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  for (uint16_t& b : block) {
    const float x = u(rng);
    uint32_t bits;
    std::memcpy(&bits, &x, 4);
    b = static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);  // finite x: no overflow to NaN
  }
  for (int64_t off = 0; off < n; off += static_cast<int64_t>(block.size())) {
    gpu.CopyIn(p + off, block.data(), 2 * std::min<int64_t>(static_cast<int64_t>(block.size()), n - off));
  }
  KVSERVE_CUDA_CHECK(cudaStreamSynchronize(CudaBackendStream(gpu)));  // block is freed on return
}

// Median wall-clock microseconds of 20 runs of fn (host work included), after one warm-up.
double WallUs(const std::function<void()>& fn) {
  fn();
  std::vector<double> us;
  for (int i = 0; i < 20; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

void Row(const char* what, double value, const char* unit, double ceiling, const char* ceiling_name, double target) {
  if (ceiling > 0) {
    std::printf("| %-56s | %10.2f %-7s | %5.1f%% of %-22s | target %3.0f%% %s |\n", what, value, unit,
                100 * value / ceiling, ceiling_name, 100 * target, value >= target * ceiling ? "ok  " : "MISS");
  } else {
    std::printf("| %-56s | %10.2f %-7s | %-31s | %-13s |\n", what, value, unit, "", "");
  }
}

// A paged KV of `seqs` sequences with `len` slots each (llama3-8b layer shape), in random page order.
struct AttnSetup {
  Backend& gpu;
  int64_t n_kv = 8, group = 4, hd = 128, ps = 16;
  std::vector<int32_t> q_indptr{0}, page_indptr{0}, page_indices, kv_len;
  PagedKv kv{};
  float *q = nullptr, *out = nullptr;
  std::vector<void*> owned;

  AttnSetup(Backend& b, int64_t seqs, int64_t n_q, int64_t len) : gpu(b) {
    const int64_t pages_per = (len + ps - 1) / ps;
    std::vector<int32_t> order(static_cast<size_t>(seqs * pages_per));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(1));
    for (int64_t s = 0; s < seqs; ++s) {
      q_indptr.push_back(static_cast<int32_t>(q_indptr.back() + n_q));
      kv_len.push_back(static_cast<int32_t>(len));
      page_indices.insert(page_indices.end(), order.begin() + s * pages_per, order.begin() + (s + 1) * pages_per);
      page_indptr.push_back(static_cast<int32_t>(page_indices.size()));
    }
    const int64_t slots = seqs * pages_per * ps;
    kv = {Alloc(slots * n_kv * hd), Alloc(slots * n_kv * hd), Alloc(slots * n_kv), ps, n_kv, hd};
    // Random K/V and q, not zeros: the softmax is not degenerate, and the bf16 tensor-core
    // prefill kernel is not timed on zeros (which run faster than real data).
    FillRandomF32(gpu, static_cast<float*>(kv.k), slots * n_kv * hd, 2);
    FillRandomF32(gpu, static_cast<float*>(kv.v), slots * n_kv * hd, 3);
    q = Alloc(seqs * n_q * n_kv * group * hd);
    FillRandomF32(gpu, q, seqs * n_q * n_kv * group * hd, 4);
    out = Alloc(seqs * n_q * n_kv * group * hd);
  }
  ~AttnSetup() {
    for (void* p : owned) gpu.Deallocate(p);
  }
  float* Alloc(int64_t n) {
    owned.push_back(gpu.Allocate(n * 4));
    return static_cast<float*>(owned.back());
  }
  void Run() {
    const AttentionBatch batch{static_cast<int32_t>(kv_len.size()), q_indptr.data(), page_indptr.data(),
                               page_indices.data(), kv_len.data()};
    gpu.Attention(kv, batch, {n_kv * group, 0.088f}, q, out);
  }
};

struct E2e {
  bool ok = false;  // false: a step failed (its message is on stderr) and the numbers are 0
  double ttft_s = 0, decode_tok_s = 0;
};

// One sequence: prefill `prompt` tokens in chunks, then `n_new` greedy decode steps.
E2e EndToEnd(const Model& model, Backend& gpu, int64_t prompt, int64_t n_new, int64_t chunk) {
  const ModelConfig& c = model.config;
  PagePoolShape shape{(prompt + n_new + 15) / 16 * c.n_layers, 16, c.n_kv_heads, c.head_dim};
  PagePool pool(shape, &gpu);
  SequenceKv seq(c.n_layers);
  LlamaForward fwd(model, gpu, pool);
  std::vector<int32_t> ids(static_cast<size_t>(prompt));
  for (int64_t i = 0; i < prompt; ++i) ids[i] = static_cast<int32_t>((i * 7919 + 13) % c.vocab_size);
  std::vector<float> logits;
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  for (int64_t pos = 0; pos < prompt; pos += chunk) {
    const int64_t n = std::min(chunk, prompt - pos);
    logits.clear();
    ForwardRequest req{absl::MakeConstSpan(ids).subspan(pos, n), pos, &seq, false};
    if (auto st = fwd.Step({&req, 1}, &logits); !st.ok()) {
      std::fprintf(stderr, "e2e prefill: %s\n", std::string(st.message()).c_str());
      return {};
    }
  }
  int32_t next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  const auto t1 = Clock::now();
  for (int64_t i = 0; i < n_new; ++i) {
    logits.clear();
    ForwardRequest req{absl::MakeConstSpan(&next, 1), prompt + i, &seq, false};
    if (auto st = fwd.Step({&req, 1}, &logits); !st.ok()) {
      std::fprintf(stderr, "e2e decode: %s\n", std::string(st.message()).c_str());
      return {};
    }
    next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  const auto t2 = Clock::now();
  seq.Release(pool);
  return {true, std::chrono::duration<double>(t1 - t0).count(),
          n_new / std::chrono::duration<double>(t2 - t1).count()};
}

int Main(int argc, char** argv) {
  std::string why, e2e_json;
  bool skip_e2e = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--e2e-json") && i + 1 < argc) e2e_json = argv[++i];
    if (!std::strcmp(argv[i], "--skip-e2e")) skip_e2e = true;
  }
  if (CudaDeviceCount(&why) == 0) {
    if (GpuRequired()) {
      std::printf("no CUDA device: %s; no timings, and KVSERVE_REQUIRE_GPU is set: failing\n", why.c_str());
      return 1;
    }
    std::printf("no CUDA device: %s; no timings\n", why.c_str());
    return 0;
  }
  cudaDeviceProp prop{};
  KVSERVE_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs, %.1f GiB\n\n", prop.name, prop.multiProcessorCount,
              prop.totalGlobalMem / 1073741824.0);
  auto gpu = MakeCudaBackend(0);
  cudaStream_t stream = CudaBackendStream(*gpu);

  // Ceiling 1: device-to-device copy of 4 GiB (read + write bytes per second).
  const int64_t copy_bytes = int64_t{4} << 30;
  void* src = gpu->Allocate(copy_bytes);
  void* dst = gpu->Allocate(copy_bytes);
  const double copy_ms = TimeMs(stream, 5, [&] { gpu->Copy(dst, src, copy_bytes); });
  const double copy_gbs = 2.0 * copy_bytes / copy_ms / 1e6;
  gpu->Deallocate(src);
  gpu->Deallocate(dst);

  // Ceiling 2: cuBLAS bf16 GEMM 8192^3, bf16 out.
  const int64_t g = 8192;
  auto* a = static_cast<__nv_bfloat16*>(gpu->Allocate(g * g * 2));
  auto* b = static_cast<__nv_bfloat16*>(gpu->Allocate(g * g * 2));
  auto* c = static_cast<__nv_bfloat16*>(gpu->Allocate(g * g * 2));
  FillRandomBf16(*gpu, a, g * g, 5);
  FillRandomBf16(*gpu, b, g * g, 6);
  cuda::Gemm gemm;
  const double gemm_ms = TimeMs(stream, 5, [&] { gemm.Run(a, b, c, CUDA_R_16BF, g, g, g, stream); });
  const double gemm_tflops = 2.0 * g * g * g / gemm_ms / 1e9;
  gpu->Deallocate(a);
  gpu->Deallocate(b);
  gpu->Deallocate(c);

  std::printf("| %-56s | %-18s | %-31s | %-13s |\n", "measurement", "value", "vs ceiling", "target");
  std::printf("|%s|%s|%s|%s|\n", std::string(58, '-').c_str(), std::string(20, '-').c_str(),
              std::string(33, '-').c_str(), std::string(15, '-').c_str());
  Row("ceiling: device-to-device copy", copy_gbs, "GB/s", 0, "", 0);
  Row("ceiling: cuBLAS bf16 GEMM 8192^3 (random inputs)", gemm_tflops, "TFLOP/s", 0, "", 0);

  // Decode attention (llama3-8b layer: 32 heads, 8 KV heads, head_dim 128, fp32 KV pages).
  for (auto [seqs, len] : {std::pair<int64_t, int64_t>{1, 32768}, {32, 8192}, {32, 32768}}) {
    AttnSetup s(*gpu, seqs, 1, len);
    const double ms = TimeMs(stream, 10, [&] { s.Run(); }, kAttnCalls);
    const double bytes = static_cast<double>(seqs) * len * s.n_kv * (2 * s.hd + 1) * 4;
    char what[96];
    std::snprintf(what, sizeof(what), "decode attention, batch %lld x %lldK, per call (avg of %d)",
                  static_cast<long long>(seqs), static_cast<long long>(len / 1024), kAttnCalls);
    Row(what, bytes / ms / 1e6, "GB/s", copy_gbs, "copy bandwidth", len == 32768 ? 0.7 : 0.0);
  }
  // Prefill attention: one 16K causal chunk (and 4K), llama3-8b layer shape.
  for (int64_t len : {4096, 16384}) {
    AttnSetup s(*gpu, 1, len, len);
    const double ms = TimeMs(stream, 3, [&] { s.Run(); }, kAttnPrefillCalls);
    const double flops = 4.0 * (static_cast<double>(len) * (len + 1) / 2) * s.hd * s.n_kv * s.group;
    char what[96];
    std::snprintf(what, sizeof(what), "prefill attention, %lldK causal, per call (avg of %d)",
                  static_cast<long long>(len / 1024), kAttnPrefillCalls);
    Row(what, flops / ms / 1e9, "TFLOP/s", gemm_tflops, "cuBLAS bf16 GEMM", len == 16384 ? 0.4 : 0.0);
  }

  // Greedy sampling: argmax on the device (4 bytes back per row) vs logits to the host.
  for (int64_t rows : {1, 32}) {
    const int64_t vocab = 128256;
    auto* logits = static_cast<float*>(gpu->Allocate(rows * vocab * 4));
    std::vector<float> host(static_cast<size_t>(rows * vocab));
    std::vector<int32_t> ids(static_cast<size_t>(rows));
    const double dev_us = WallUs([&] { CudaArgmaxRows(*gpu, logits, ids.data(), rows, vocab); });
    const double host_us = WallUs([&] {
      gpu->CopyOut(host.data(), logits, rows * vocab * 4);
      for (int64_t r = 0; r < rows; ++r) {
        ids[r] = static_cast<int32_t>(std::max_element(host.begin() + r * vocab, host.begin() + (r + 1) * vocab) -
                                      (host.begin() + r * vocab));
      }
    });
    char what[96];
    std::snprintf(what, sizeof(what), "greedy sampling batch %lld: device argmax", static_cast<long long>(rows));
    Row(what, dev_us, "us", 0, "", 0);
    std::snprintf(what, sizeof(what), "greedy sampling batch %lld: logits to host", static_cast<long long>(rows));
    Row(what, host_us, "us", 0, "", 0);
    gpu->Deallocate(logits);
  }

  // Top-k sampling (top_k 40, top_p 0.9, T 0.8): the device's top_k + 1 candidates per row and
  // the draw on the host, vs the whole rows to the host and Sampler::Sample. Both draw the same
  // tokens (same seeds, Sampler::SampleFromTopK is exact), which the last call checks.
  int rc = 0;
  for (int64_t rows : {1, 32}) {
    const int64_t vocab = 128256;
    SamplingParams params;
    params.top_k = 40;
    params.top_p = 0.9f;
    params.temperature = 0.8f;
    const int64_t k = Sampler::TopKCandidatesNeeded(params, vocab);
    std::vector<float> host(static_cast<size_t>(rows * vocab));
    std::mt19937 rng(3);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    for (float& x : host) x = normal(rng);
    auto* logits = static_cast<float*>(gpu->Allocate(rows * vocab * 4));
    gpu->CopyIn(logits, host.data(), rows * vocab * 4);
    std::vector<Sampler> dev_samplers, host_samplers;
    for (int64_t r = 0; r < rows; ++r) {
      params.seed = static_cast<uint64_t>(r);
      dev_samplers.emplace_back(params);
      host_samplers.emplace_back(params);
    }
    std::vector<int32_t> cand_ids(static_cast<size_t>(rows * k)), dev_tokens(rows), host_tokens(rows);
    std::vector<float> cand_vals(static_cast<size_t>(rows * k));
    const double dev_us = WallUs([&] {
      CudaTopKRows(*gpu, logits, rows, vocab, k, cand_ids.data(), cand_vals.data());
      for (int64_t r = 0; r < rows; ++r) {
        const auto t = dev_samplers[r].SampleFromTopK(absl::MakeConstSpan(cand_ids).subspan(r * k, k),
                                                      absl::MakeConstSpan(cand_vals).subspan(r * k, k), vocab);
        dev_tokens[r] = t.value_or(-1);
      }
    });
    const double host_us = WallUs([&] {
      gpu->CopyOut(host.data(), logits, rows * vocab * 4);
      for (int64_t r = 0; r < rows; ++r)
        host_tokens[r] = host_samplers[r].Sample(absl::MakeConstSpan(host).subspan(r * vocab, vocab), {});
    });
    char what[96];
    std::snprintf(what, sizeof(what), "top-k sampling batch %lld: device top-k + host draw",
                  static_cast<long long>(rows));
    Row(what, dev_us, "us", 0, "", 0);
    std::snprintf(what, sizeof(what), "top-k sampling batch %lld: logits to host + host sampler",
                  static_cast<long long>(rows));
    Row(what, host_us, "us", 0, "", 0);
    if (dev_tokens != host_tokens) {
      std::printf("top-k sampling batch %lld: the two paths drew different tokens\n", static_cast<long long>(rows));
      rc = 1;
    }
    gpu->Deallocate(logits);
  }

  if (skip_e2e) return rc;
  // End to end on random:llama3-8b (bf16 weights, 16 GB).
  const auto t0 = std::chrono::steady_clock::now();
  auto model = MakeRandomModel("llama3-8b", 1);
  if (!model.ok()) {
    std::printf("random:llama3-8b: %s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  std::printf("| %-56s | %10.2f %-7s | %-31s | %-13s |\n", "random:llama3-8b host init", 
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), "s", "", "");
  // Warm-up as long as the first measured prompt, in the same 8K chunk: uploads the weights,
  // grows the scratch buffers and makes the cuBLASLt plans of an 8K chunk, none of which
  // belongs in a measured TTFT (~1 s more on an H200).
  if (!EndToEnd(*model, *gpu, 8192, 4, 8192).ok) {
    std::printf("e2e warm-up failed (see stderr)\n");
    rc = 1;
  }
  std::string json = "{";
  for (int64_t prompt : {8192, 32768}) {
    const E2e r = EndToEnd(*model, *gpu, prompt, 32, 8192);
    char what[96];
    if (r.ok) {
      std::snprintf(what, sizeof(what), "e2e llama3-8b TTFT, %lldK prompt", static_cast<long long>(prompt / 1024));
      Row(what, r.ttft_s, "s", 0, "", 0);
      std::snprintf(what, sizeof(what), "e2e llama3-8b decode after %lldK prompt",
                    static_cast<long long>(prompt / 1024));
      Row(what, r.decode_tok_s, "tok/s", 0, "", 0);
    } else {  // zeros in the JSON, which hf_peer.py skips
      std::printf("e2e llama3-8b %lldK prompt FAILED (see stderr)\n", static_cast<long long>(prompt / 1024));
      rc = 1;
    }
    char kv[160];
    std::snprintf(kv, sizeof(kv), "%s\"ttft_%lldk_s\":%.6f,\"decode_%lldk_tok_s\":%.6f", prompt == 8192 ? "" : ",",
                  static_cast<long long>(prompt / 1024), r.ttft_s, static_cast<long long>(prompt / 1024),
                  r.decode_tok_s);
    json += kv;
  }
  json += "}\n";
  if (!e2e_json.empty()) {
    if (FILE* f = std::fopen(e2e_json.c_str(), "w")) {
      std::fputs(json.c_str(), f);
      std::fclose(f);
    }
  }
  return rc;
}

}  // namespace
}  // namespace kvserve

int main(int argc, char** argv) { return kvserve::Main(argc, argv); }
