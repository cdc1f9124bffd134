// CpuBackend: the always-built reference backend, multi-threaded with OpenMP and OpenBLAS.
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/matmul.h"

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

 private:
  // Only the matmuls and attention vary with the batch; every other op computes each token on
  // its own with one fixed loop.
  const Determinism determinism_;
};

}  // namespace

std::string_view CpuKernelIsa() { return cpu::CpuIsaName(cpu::ActiveKernels().isa); }

std::unique_ptr<Backend> MakeCpuBackend(Determinism determinism) {
  return std::make_unique<CpuBackend>(determinism);
}

}  // namespace kvserve
