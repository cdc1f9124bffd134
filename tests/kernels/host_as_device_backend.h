// A backend for running device code paths on the CPU in CI: it is the CPU backend, but
// reports HostMemory() false, so a PagePool made with it counts as device memory and the
// engine takes every branch it takes for CUDA (device compression ops, copies of query rows
// and logits through CopyOut, refusals of host-only policies). Its memory is still host
// memory, so results can be compared exactly with the CPU backend.
#pragma once
#include <memory>
#include <string_view>

#include "kernels/backend.h"

namespace kvserve {

// The CPU backend with HostMemory() false: everything a device backend would get, on the host.
// compression_ops counts TopKPerHead calls, which only the device compression path makes.
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
  // What FreeMemoryBytes reports (a device's free memory; -1 = unknown).
  int64_t free_bytes = -1;
  int64_t FreeMemoryBytes() override { return free_bytes; }
  int64_t compression_ops = 0;
  void TopKPerHead(const float* scores, int64_t heads, int64_t len, int64_t k, int32_t* slots) override {
    ++compression_ops;
    cpu_->TopKPerHead(scores, heads, len, k, slots);
  }
  void SnapKvScores(const PagedKv& kv, const int32_t* pages, int64_t len, const float* window, int64_t w,
                    const AttentionShape& shape, int64_t pool_kernel, float* scores) override {
    cpu_->SnapKvScores(kv, pages, len, window, w, shape, pool_kernel, scores);
  }
  void ProjectedValueNorms(const PagedKv& kv, const int32_t* pages, int64_t first, int64_t len, const WeightView& wo,
                           int64_t n_heads, float* norms, int64_t stride) override {
    cpu_->ProjectedValueNorms(kv, pages, first, len, wo, n_heads, norms, stride);
  }
  void CriticalKvScores(const float* base, const float* norms, int64_t norms_stride, int64_t heads, int64_t len,
                        int64_t n_first, float eps, float* merged) override {
    cpu_->CriticalKvScores(base, norms, norms_stride, heads, len, n_first, eps, merged);
  }
  void MergeEvictedWeights(const PagedKv& kv, const int32_t* pages, int64_t len, const int32_t* slots, int64_t k,
                           float radius, bool merge_values, float* out_log_w) override {
    cpu_->MergeEvictedWeights(kv, pages, len, slots, k, radius, merge_values, out_log_w);
  }
  void CompactKv(const PagedKv& kv, const int32_t* pages, int64_t len, const int32_t* slots, const float* new_log_w,
                 int64_t k) override {
    cpu_->CompactKv(kv, pages, len, slots, new_log_w, k);
  }
  void GatherPerHead(const float* src, int64_t src_stride, const int32_t* slots, int64_t heads, int64_t k, float* dst,
                     int64_t dst_stride) override {
    cpu_->GatherPerHead(src, src_stride, slots, heads, k, dst, dst_stride);
  }

 private:
  std::unique_ptr<Backend> cpu_ = MakeCpuBackend();
};

}  // namespace kvserve
