// Timings of GPU KV compression for one Llama-3.1-8B-shaped layer (32 query heads, 8 KV
// heads, head_dim 128, hidden 4096, ffn 14336, pages of 16) at 32K and 128K context: SnapKV
// scoring, CriticalKV's value norms and merge, per-head top-k, compaction, and their total as
// a share of that layer's prefill time (target < 5%). The layer's prefill time is estimated
// from measured ops: causal prefill attention over the whole context in one call, plus the
// layer's seven GEMMs (q, k, v, o, gate, up, down) timed on an 8192-token chunk and scaled to
// the context; norms, RoPE and elementwise ops are left out (well under 1% of it).
// Prints "no CUDA device: ..." and exits 0 without a GPU (1 when KVSERVE_REQUIRE_GPU=1 says
// there must be one).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_device.h"
#include "tests/kernels/cuda/cuda_timer.h"
#include "tests/kernels/cuda/require_gpu.h"

namespace kvserve {
namespace {

constexpr int64_t kHeads = 32, kKvHeads = 8, kHeadDim = 128, kHidden = 4096, kFfn = 14336, kPage = 16;
constexpr int64_t kWindow = 64, kChunk = 8192;

// Median milliseconds of `reps` runs of fn on stream, after one warm-up.
double TimeMs(cudaStream_t stream, int reps, const std::function<void()>& fn) {
  return CudaTimeMs(stream, reps, fn);
}

// Backend buffers freed at scope end.
struct Arena {
  Backend& gpu;
  std::vector<void*> owned;
  explicit Arena(Backend& b) : gpu(b) {}
  ~Arena() {
    for (void* p : owned) gpu.Deallocate(p);
  }
  template <typename T>
  T* Alloc(int64_t n) {
    owned.push_back(gpu.Allocate(static_cast<int64_t>(sizeof(T)) * n));
    return static_cast<T*>(owned.back());
  }
  // Uniform [-scale, scale) floats, uploaded 16M at a time.
  float* Random(int64_t n, float scale, uint32_t seed) {
    float* p = Alloc<float>(n);
    std::vector<float> chunk(static_cast<size_t>(std::min<int64_t>(n, int64_t{1} << 24)));
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-scale, scale);
    for (float& x : chunk) x = u(rng);
    for (int64_t off = 0; off < n; off += static_cast<int64_t>(chunk.size())) {
      gpu.CopyIn(p + off, chunk.data(), 4 * std::min<int64_t>(static_cast<int64_t>(chunk.size()), n - off));
    }
    return p;
  }
};

// A random bf16 weight [rows, cols] in host memory (the backend caches it on first use).
struct HostWeight {
  std::vector<uint16_t> bits;
  WeightView view;
  HostWeight(int64_t rows, int64_t cols, uint32_t seed) : bits(static_cast<size_t>(rows * cols)) {
    std::mt19937 rng(seed);
    // bf16 of small random values: sign, exponent around 2^-6, random mantissa.
    for (uint16_t& b : bits) b = static_cast<uint16_t>(0x3C00u | (rng() & 0x807Fu));
    view = WeightView{DType::kBF16, rows, cols, bits.data()};
  }
};

std::vector<int32_t> ShuffledPages(int64_t slots, uint32_t seed) {
  std::vector<int32_t> pages(static_cast<size_t>((slots + kPage - 1) / kPage));
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), std::mt19937(seed));
  return pages;
}

struct CompressMs {
  double snapkv = 0, norms = 0, merge = 0, topk = 0, compact = 0;
  double evicted = 0;  // --evicted-weight merge: the evicted entries' weight to the nearest kept
  double SnapKvTotal() const { return snapkv + topk + compact; }
  double CriticalKvTotal() const { return snapkv + norms + merge + topk + compact; }
};

// One compression of a layer of `len` slots down to `keep`, projecting the values of slots
// [first_new, len) (the others' norms are cached from earlier compressions).
CompressMs TimeCompression(Backend& gpu, cudaStream_t stream, const WeightView& wo, int64_t len, int64_t first_new,
                           int64_t keep) {
  Arena a(gpu);
  const std::vector<int32_t> pages = ShuffledPages(len, 3);
  const int64_t slots = static_cast<int64_t>(pages.size()) * kPage;
  const PagedKv kv{a.Random(slots * kKvHeads * kHeadDim, 1, 4), a.Random(slots * kKvHeads * kHeadDim, 1, 5),
                   a.Random(slots * kKvHeads, 0.1f, 6), kPage, kKvHeads, kHeadDim};
  const float* window = a.Random(kWindow * kHeads * kHeadDim, 1, 7);
  float* scores = a.Alloc<float>(kKvHeads * len);
  float* norms = a.Alloc<float>(kKvHeads * len);
  float* merged = a.Alloc<float>(kKvHeads * len);
  int32_t* kept = a.Alloc<int32_t>(kKvHeads * keep);
  const AttentionShape shape{kHeads, 1.0f / std::sqrt(static_cast<float>(kHeadDim))};
  CompressMs t;
  t.snapkv = TimeMs(stream, 5, [&] { gpu.SnapKvScores(kv, pages.data(), len, window, kWindow, shape, 5, scores); });
  t.norms = TimeMs(stream, 5, [&] { gpu.ProjectedValueNorms(kv, pages.data(), first_new, len, wo, kHeads, norms, len); });
  t.merge = TimeMs(stream, 5, [&] { gpu.CriticalKvScores(scores, norms, len, kKvHeads, len, keep / 2, 1e-4f, merged); });
  t.topk = TimeMs(stream, 5, [&] { gpu.TopKPerHead(merged, kKvHeads, len, keep, kept); });
  float* merged_log_w = a.Alloc<float>(kKvHeads * keep);
  t.evicted = TimeMs(stream, 3, [&] { gpu.MergeEvictedWeights(kv, pages.data(), len, kept, keep, 0.5f /* merge-near */, false, merged_log_w); });
  // In place again and again: the data turns to garbage, the memory traffic stays the same.
  t.compact = TimeMs(stream, 5, [&] { gpu.CompactKv(kv, pages.data(), len, kept, nullptr, keep); });
  return t;
}

// The layer's prefill of `len` tokens, estimated from measured ops (see the file comment).
double LayerPrefillMs(Backend& gpu, cudaStream_t stream, const std::vector<HostWeight>& gemms, int64_t len) {
  double attn_ms = 0, gemm_ms = 0;
  {
    Arena a(gpu);
    const std::vector<int32_t> pages = ShuffledPages(len, 9);
    const int64_t slots = static_cast<int64_t>(pages.size()) * kPage;
    const PagedKv kv{a.Random(slots * kKvHeads * kHeadDim, 1, 10), a.Random(slots * kKvHeads * kHeadDim, 1, 11),
                     a.Alloc<float>(slots * kKvHeads), kPage, kKvHeads, kHeadDim};
    const float* q = a.Random(len * kHeads * kHeadDim, 1, 12);
    float* out = a.Alloc<float>(len * kHeads * kHeadDim);
    const std::vector<int32_t> q_indptr = {0, static_cast<int32_t>(len)},
                               page_indptr = {0, static_cast<int32_t>(pages.size())},
                               kv_len = {static_cast<int32_t>(len)};
    const AttentionBatch batch{1, q_indptr.data(), page_indptr.data(), pages.data(), kv_len.data()};
    attn_ms = TimeMs(stream, 3, [&] {
      gpu.Attention(kv, batch, {kHeads, 1.0f / std::sqrt(static_cast<float>(kHeadDim))}, q, out);
    });
  }
  {
    Arena a(gpu);
    const float* x = a.Random(kChunk * kFfn, 1, 13);  // the widest input (down's)
    float* y = a.Alloc<float>(kChunk * kFfn);
    gemm_ms = TimeMs(stream, 3, [&] {
      for (const HostWeight& w : gemms) gpu.MatMul(w.view, x, y, kChunk);
    });
  }
  return attn_ms + gemm_ms * static_cast<double>(len) / kChunk;
}

void Row(const char* what, double ms, double share_of = 0) {
  if (share_of > 0) {
    const double pct = 100 * ms / share_of;
    std::printf("| %-62s | %10.3f ms | %6.2f%% of layer prefill | %s |\n", what, ms, pct, pct < 5 ? "ok  " : "MISS");
  } else {
    std::printf("| %-62s | %10.3f ms | %-24s |      |\n", what, ms, "");
  }
}

int Main() {
  std::string why;
  if (CudaDeviceCount(&why) == 0) {
    if (GpuRequired()) {
      std::printf("no CUDA device: %s; no KV compression timings, and KVSERVE_REQUIRE_GPU is set: failing\n",
                  why.c_str());
      return 1;
    }
    std::printf("no CUDA device: %s; no KV compression timings\n", why.c_str());
    return 0;
  }
  auto gpu = MakeCudaBackend(0);
  cudaStream_t stream = CudaBackendStream(*gpu);
  std::vector<HostWeight> gemms;
  gemms.emplace_back(kHeads * kHeadDim, kHidden, 1);    // q
  gemms.emplace_back(kKvHeads * kHeadDim, kHidden, 2);  // k
  gemms.emplace_back(kKvHeads * kHeadDim, kHidden, 3);  // v
  gemms.emplace_back(kHidden, kHeads * kHeadDim, 4);    // o
  gemms.emplace_back(kFfn, kHidden, 5);                 // gate
  gemms.emplace_back(kFfn, kHidden, 6);                 // up
  gemms.emplace_back(kHidden, kFfn, 7);                 // down
  const HostWeight& wo = gemms[3];

  std::printf("\nKV compression, Llama-3.1-8B layer (32/8 heads, head_dim 128, hidden 4096, page 16), "
              "window %lld, 10%% budget\n", static_cast<long long>(kWindow));
  std::printf("| %-62s | %13s | %-24s | %-4s |\n", "measurement", "time", "share", "<5%");
  std::printf("|%s|%s|%s|%s|\n", std::string(64, '-').c_str(), std::string(15, '-').c_str(),
              std::string(26, '-').c_str(), std::string(6, '-').c_str());
  for (int64_t len : {int64_t{32768}, int64_t{131072}}) {
    const int64_t keep = len / 10;
    const double prefill = LayerPrefillMs(*gpu, stream, gemms, len);
    const CompressMs pe = TimeCompression(*gpu, stream, wo.view, len, 0, keep);
    // Chunk mode: after every 8K chunk a layer of keep + 8K slots goes back to keep, and only
    // the chunk's values are projected.
    const int64_t n_chunks = (len - keep + kChunk - 1) / kChunk;
    const CompressMs ch = TimeCompression(*gpu, stream, wo.view, keep + kChunk, keep, keep);
    char what[128];
    auto row = [&](const char* name, double ms, bool share) {
      std::snprintf(what, sizeof(what), "%lldK %s", static_cast<long long>(len / 1024), name);
      Row(what, ms, share ? prefill : 0);
    };
    row("layer prefill (attention + 7 GEMMs, estimated)", prefill, false);
    row("prefill_end: SnapKV scoring", pe.snapkv, false);
    row("prefill_end: CriticalKV value norms (all entries)", pe.norms, false);
    row("prefill_end: CriticalKV two-stage merge (incl. stage-1 top-k)", pe.merge, false);
    row("prefill_end: selection (per-head top-k)", pe.topk, false);
    row("prefill_end: compaction", pe.compact, false);
    row("prefill_end: --evicted-weight merge", pe.evicted, false);
    row("prefill_end: SnapKV total", pe.SnapKvTotal(), true);
    row("prefill_end: CriticalKV total", pe.CriticalKvTotal(), true);
    std::snprintf(what, sizeof(what), "chunk: CriticalKV total (%lld compressions)", static_cast<long long>(n_chunks));
    row(what, ch.CriticalKvTotal() * static_cast<double>(n_chunks), true);
    std::snprintf(what, sizeof(what), "chunk: --evicted-weight merge (%lld compressions)", static_cast<long long>(n_chunks));
    row(what, ch.evicted * static_cast<double>(n_chunks), true);
  }
  return 0;
}

}  // namespace
}  // namespace kvserve

int main() { return kvserve::Main(); }
