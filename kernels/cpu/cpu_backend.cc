// CpuBackend: the always-built reference backend, multi-threaded with OpenMP and OpenBLAS.
#include <cctype>
#include <cstdlib>
#include <string>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/kv_compress_ops.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/prefetch.h"

namespace kvserve {
namespace {

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(Determinism determinism) : determinism_(determinism) {}
  std::string_view Name() const override { return "cpu"; }
  void Embed(const WeightView& table, const int32_t* tokens, int64_t n, float* out) override {
    cpu::Embed(table, tokens, n, out);
  }
  void RmsNorm(const float* x, const float* gain, float* out, int64_t n, int64_t dim,
               float eps) override {
    cpu::RmsNorm(x, gain, out, n, dim, eps);
  }
  void MatMul(const WeightView& w, const float* x, float* y, int64_t n) override {
    cpu::MatMulShared(&w, &y, 1, x, n, determinism_);
  }
  void MatMulShared(const WeightView* ws, float* const* ys, int64_t count, const float* x, int64_t n) override {
    cpu::MatMulShared(ws, ys, count, x, n, determinism_);
  }
  void AddBias(float* y, const float* bias, int64_t n, int64_t dim) override {
    cpu::AddBias(y, bias, n, dim);
  }
  void Rope(float* x, const int32_t* positions, int64_t n, int64_t n_heads, int64_t head_dim,
            const float* inv_freq, int64_t rot_dim, bool neox) override {
    cpu::Rope(x, positions, n, n_heads, head_dim, inv_freq, rot_dim, neox);
  }
  void WriteKv(const PagedKv& kv, const AttentionBatch& batch, const float* k,
               const float* v) override {
    cpu::WriteKv(kv, batch, k, v);
  }
  void Attention(const PagedKv& kv, const AttentionBatch& batch, const AttentionShape& shape,
                 const float* q, float* out) override {
    cpu::PagedAttention(kv, batch, shape, q, out, determinism_);
  }
  void SwiGlu(const float* gate, const float* up, float* out, int64_t n) override {
    cpu::SwiGlu(gate, up, out, n);
  }
  void Add(float* x, const float* y, int64_t n) override { cpu::Add(x, y, n); }

  // KV compression. Scoring takes the float forms (the references' numerics differ in the
  // last bits; the float forms are what the goldens pin); the rest are exact either way.
  void SnapKvScores(const PagedKv& kv, const int32_t* pages, int64_t len, const float* window, int64_t w,
                    const AttentionShape& shape, int64_t pool_kernel, float* scores) override {
    cpu::SnapKvScoresBlas(kv, pages, len, window, w, shape.n_heads, shape.scale, pool_kernel, determinism_, scores);
  }
  void ProjectedValueNorms(const PagedKv& kv, const int32_t* pages, int64_t first, int64_t len, const WeightView& wo,
                           int64_t n_heads, float* norms, int64_t stride) override {
    cpu::ProjectedValueNormsBlas(kv, pages, first, len, wo, n_heads, determinism_, norms, stride);
  }
  void CriticalKvScores(const float* base, const float* norms, int64_t norms_stride, int64_t heads, int64_t len,
                        int64_t n_first, float eps, float* merged) override {
    cpu::CriticalKvScores(base, norms, norms_stride, heads, len, n_first, eps, merged);
  }
  void TopKPerHead(const float* scores, int64_t heads, int64_t len, int64_t k, int32_t* slots) override {
    cpu::TopKPerHead(scores, heads, len, k, slots);
  }
  void MergeEvictedWeights(const PagedKv& kv, const int32_t* pages, int64_t len, const int32_t* slots, int64_t k,
                           float radius, bool merge_values, float* out_log_w) override {
    cpu::MergeEvictedWeightsTiled(kv, pages, len, slots, k, radius, merge_values, out_log_w);
  }
  void CompactKv(const PagedKv& kv, const int32_t* pages, int64_t len, const int32_t* slots, const float* new_log_w,
                 int64_t k) override {
    cpu::CompactKv(kv, pages, len, slots, new_log_w, k, nullptr);
  }
  void GatherPerHead(const float* src, int64_t src_stride, const int32_t* slots, int64_t heads, int64_t k, float* dst,
                     int64_t dst_stride) override {
    cpu::GatherPerHead(src, src_stride, slots, heads, k, dst, dst_stride);
  }

 private:
  // Only the matmuls, attention and the scores built on matmuls vary with the batch; every other op computes each token on
  // its own with one fixed loop.
  const Determinism determinism_;
};

}  // namespace

std::string_view CpuKernelIsa() { return cpu::CpuIsaName(cpu::ActiveKernels().isa); }

std::string_view CpuKvPrefetchLevel() { return cpu::PrefetchLevelName(cpu::kv_prefetch_level); }

std::string CpuWeightPrefetch() {
  return std::string(cpu::PrefetchLevelName(cpu::weight_prefetch_level)) + "/" +
         std::to_string(cpu::weight_prefetch_bytes);
}

std::string CpuOpenMpWait() {
  std::string out;
  for (const char* name : {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"}) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') continue;
    std::string value(v);
    // Printed in logs and inside JSON strings: anything but a plain word is shown as '?'.
    for (char& ch : value) {
      if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '?';
    }
    if (!out.empty()) out.push_back(' ');
    out.append(name).append("=").append(value);
  }
  return out.empty() ? "libgomp default" : out;
}

std::unique_ptr<Backend> MakeCpuBackend(Determinism determinism) {
  return std::make_unique<CpuBackend>(determinism);
}

}  // namespace kvserve
