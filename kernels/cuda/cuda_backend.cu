// CudaBackend: device memory, the weight cache, small metadata uploads, and the dispatch of
// each Backend op to its kernel file. Every op is stream-ordered on one stream; only CopyOut
// (and weight upload) waits for the device.
#include "kernels/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/attention_plan.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/weight_cache.h"

namespace kvserve {
namespace {

// Device pools hold fp32 K/V: CheckKvDType (engine/kv/page_pool.h) refuses fp16 for them.
float* F32Pages(const PagedKv& kv, void* pages) {
  if (kv.dtype != DType::kF32) {
    std::fprintf(stderr, "kvserve: CUDA KV pages must be f32, got %s\n", std::string(DTypeName(kv.dtype)).c_str());
    std::abort();
  }
  return static_cast<float*>(pages);
}

// A grow-only device buffer for per-op scratch. Growing frees the old one (cudaFree waits
// for the device, so kernels still reading it finish first).
class Scratch {
 public:
  ~Scratch() { cudaFree(p_); }
  void* Get(size_t bytes) {
    if (bytes > bytes_) {
      KVSERVE_CUDA_CHECK(cudaFree(p_));
      bytes_ = std::max(bytes, bytes_ * 2);
      KVSERVE_CUDA_CHECK(cudaMalloc(&p_, bytes_));
    }
    return p_;
  }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// Host metadata (token ids, positions, page tables, work lists) gathered into one staging
// buffer and sent with one copy. The device copy is reused by the next op; that is safe
// because both run in order on the same stream.
class MetaUpload {
 public:
  // Appends n elements, returns their byte offset (16-byte aligned).
  template <typename T>
  size_t Add(const T* p, size_t n) {
    const size_t off = (host_.size() + 15) / 16 * 16;
    host_.resize(off + sizeof(T) * n);
    if (n) std::memcpy(host_.data() + off, p, sizeof(T) * n);
    return off;
  }
  // Uploads everything added since the last Send; returns the device base address.
  const unsigned char* Send(Scratch& dev, cudaStream_t stream) {
    auto* base = static_cast<unsigned char*>(dev.Get(std::max<size_t>(host_.size(), 16)));
    // From pageable memory the copy has consumed host_ on return, so it can be cleared.
    KVSERVE_CUDA_CHECK(cudaMemcpyAsync(base, host_.data(), host_.size(), cudaMemcpyHostToDevice, stream));
    host_.clear();
    return base;
  }

 private:
  std::vector<unsigned char> host_;
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device) {
    KVSERVE_CUDA_CHECK(cudaSetDevice(device));
    KVSERVE_CUDA_CHECK(cudaStreamCreate(&stream_));
    KVSERVE_CUDA_CHECK(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, device));
    weights_ = std::make_unique<cuda::WeightCache>(stream_);
    gemm_ = std::make_unique<cuda::Gemm>();
  }
  ~CudaBackend() override {
    cudaStreamSynchronize(stream_);
    weights_.reset();
    gemm_.reset();
    cudaStreamDestroy(stream_);
  }

  std::string_view Name() const override { return "cuda"; }
  bool HostMemory() const override { return false; }
  void* Allocate(int64_t bytes) override {
    if (bytes <= 0) return nullptr;
    void* p = nullptr;
    KVSERVE_CUDA_CHECK(cudaMalloc(&p, static_cast<size_t>(bytes)));
    KVSERVE_CUDA_CHECK(cudaMemsetAsync(p, 0, static_cast<size_t>(bytes), stream_));
    return p;
  }
  void Deallocate(void* p) override {
    if (p) KVSERVE_CUDA_CHECK(cudaFree(p));
  }
  void CopyIn(void* dst, const void* host_src, int64_t bytes) override {
    if (bytes > 0) KVSERVE_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
  }
  void CopyOut(void* host_dst, const void* src, int64_t bytes) override {
    if (bytes > 0) KVSERVE_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
    KVSERVE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void Copy(void* dst, const void* src, int64_t bytes) override {
    if (bytes > 0) KVSERVE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
  }
  int64_t FreeMemoryBytes() override {
    size_t free_bytes = 0, total_bytes = 0;
    KVSERVE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    return static_cast<int64_t>(free_bytes);
  }

  void Embed(const WeightView& table, const int32_t* tokens, int64_t n, float* out) override {
    const __nv_bfloat16* t = weights_->Bf16(table);
    const size_t off = meta_.Add(tokens, n);
    const unsigned char* base = meta_.Send(meta_dev_, stream_);
    cuda::EmbedBf16(t, reinterpret_cast<const int32_t*>(base + off), out, n, table.cols, stream_);
  }
  void RmsNorm(const float* x, const float* gain, float* out, int64_t n, int64_t dim, float eps) override {
    cuda::RmsNorm(x, weights_->F32(gain, dim), out, n, dim, eps, stream_);
  }
  void MatMul(const WeightView& w, const float* x, float* y, int64_t n) override {
    if (n <= 0) return;
    const __nv_bfloat16* wb = weights_->Bf16(w);
    auto* xb = static_cast<__nv_bfloat16*>(x_bf16_.Get(sizeof(__nv_bfloat16) * n * w.cols));
    cuda::F32ToBf16(x, xb, n * w.cols, stream_);
    gemm_->Run(wb, xb, y, CUDA_R_32F, n, w.rows, w.cols, stream_);
  }
  void AddBias(float* y, const float* bias, int64_t n, int64_t dim) override {
    cuda::AddBias(y, weights_->F32(bias, dim), n, dim, stream_);
  }
  void Rope(float* x, const int32_t* positions, int64_t n, int64_t n_heads, int64_t head_dim,
            const float* inv_freq, int64_t rot_dim, bool neox) override {
    const float* f = weights_->F32(inv_freq, rot_dim / 2);
    const size_t off = meta_.Add(positions, n);
    const unsigned char* base = meta_.Send(meta_dev_, stream_);
    cuda::Rope(x, reinterpret_cast<const int32_t*>(base + off), f, n, n_heads, head_dim, rot_dim, neox, stream_);
  }
  void WriteKv(const PagedKv& kv, const AttentionBatch& batch, const float* k, const float* v) override {
    // Slots are resolved here from the host page tables; the kernel only scatters rows.
    slots_.clear();
    for (int32_t s = 0; s < batch.n_seqs; ++s) {
      const int32_t* pages = batch.page_indices + batch.page_indptr[s];
      const int64_t n_q = batch.q_indptr[s + 1] - batch.q_indptr[s];
      for (int64_t i = 0; i < n_q; ++i) {
        const int64_t j = batch.kv_len[s] - n_q + i;
        slots_.push_back(static_cast<int32_t>(pages[j / kv.page_size] * kv.page_size + j % kv.page_size));
      }
    }
    const size_t off = meta_.Add(slots_.data(), slots_.size());
    const unsigned char* base = meta_.Send(meta_dev_, stream_);
    cuda::WriteKv(F32Pages(kv, kv.k), F32Pages(kv, kv.v), kv.log_w, reinterpret_cast<const int32_t*>(base + off), k, v,
                  static_cast<int64_t>(slots_.size()), kv.n_kv_heads, kv.head_dim, stream_);
  }
  void Attention(const PagedKv& kv, const AttentionBatch& batch, const AttentionShape& shape, const float* q,
                 float* out) override;
  void SwiGlu(const float* gate, const float* up, float* out, int64_t n) override {
    cuda::SwiGlu(gate, up, out, n, stream_);
  }
  void Add(float* x, const float* y, int64_t n) override { cuda::Add(x, y, n, stream_); }

  // KV compression: the page list goes up with the metadata; everything else stays on the
  // device, so a layer's selection and compaction never wait for the device.
  void SnapKvScores(const PagedKv& kv, const int32_t* pages, int64_t len, const float* window, int64_t w,
                    const AttentionShape& shape, int64_t pool_kernel, float* scores) override;
  void ProjectedValueNorms(const PagedKv& kv, const int32_t* pages, int64_t first, int64_t len, const WeightView& wo,
                           int64_t n_heads, float* norms, int64_t stride) override;
  void CriticalKvScores(const float* base, const float* norms, int64_t norms_stride, int64_t heads, int64_t len,
                        int64_t n_first, float eps, float* merged) override;
  void TopKPerHead(const float* scores, int64_t heads, int64_t len, int64_t k, int32_t* slots) override {
    cuda::TopKPerHead(scores, slots, compress_.Get(cuda::TopKScratchBytes(heads, len)), heads, len, k, stream_);
  }
  void MergeEvictedWeights(const PagedKv& kv, const int32_t* pages, int64_t len, const int32_t* slots, int64_t k,
                           float radius, bool merge_values, float* out_log_w) override;
  void CompactKv(const PagedKv& kv, const int32_t* pages, int64_t len, const int32_t* slots, const float* new_log_w,
                 int64_t k) override;
  void GatherPerHead(const float* src, int64_t src_stride, const int32_t* slots, int64_t heads, int64_t k, float* dst,
                     int64_t dst_stride) override {
    cuda::GatherPerHead(src, slots, dst, heads, k, src_stride, dst_stride, stream_);
  }

  cudaStream_t stream() const { return stream_; }
  void ArgmaxRows(const float* logits, int32_t* host_ids, int64_t rows, int64_t vocab) {
    auto* ids = static_cast<int32_t*>(ids_.Get(sizeof(int32_t) * std::max<int64_t>(rows, 1)));
    cuda::ArgmaxRows(logits, ids, rows, vocab, stream_);
    CopyOut(host_ids, ids, sizeof(int32_t) * rows);
  }
  void TopKRows(const float* logits, int64_t rows, int64_t vocab, int64_t k, int32_t* host_ids, float* host_vals) {
    if (k < 1 || k > std::min(cuda::kTopKRowsMaxK, vocab) || vocab >= (int64_t{1} << 31)) {
      std::fprintf(stderr,
                   "kvserve: CUDA top-k needs 1 <= k <= min(%lld, vocab) and vocab < 2^31, got k %lld, vocab %lld\n",
                   static_cast<long long>(cuda::kTopKRowsMaxK), static_cast<long long>(k), static_cast<long long>(vocab));
      std::abort();
    }
    if (rows <= 0) return;
    const size_t n = static_cast<size_t>(rows * k);
    auto* ids = static_cast<int32_t*>(topk_.Get(n * (sizeof(int32_t) + sizeof(float))));
    auto* vals = reinterpret_cast<float*>(ids + n);
    cuda::TopKRows(logits, ids, vals, rows, vocab, k, stream_);
    KVSERVE_CUDA_CHECK(cudaMemcpyAsync(host_ids, ids, sizeof(int32_t) * n, cudaMemcpyDeviceToHost, stream_));
    CopyOut(host_vals, vals, static_cast<int64_t>(sizeof(float) * n));  // waits for both copies
  }

 private:
  cudaStream_t stream_ = nullptr;
  int sms_ = 0;
  std::unique_ptr<cuda::WeightCache> weights_;
  std::unique_ptr<cuda::Gemm> gemm_;
  MetaUpload meta_;
  Scratch meta_dev_, x_bf16_, part_, ids_, topk_;  // topk_: [rows, k] ids then values
  Scratch compress_, first_slots_;  // KV compression scratch; stage-1 slots of CriticalKV
  std::vector<int32_t> slots_;

  const int32_t* UploadPages(const int32_t* pages, int64_t len, int64_t page_size) {
    const size_t off = meta_.Add(pages, static_cast<size_t>((len + page_size - 1) / page_size));
    return reinterpret_cast<const int32_t*>(meta_.Send(meta_dev_, stream_) + off);
  }
};

void CudaBackend::SnapKvScores(const PagedKv& kv, const int32_t* pages, int64_t len, const float* window, int64_t w,
                               const AttentionShape& shape, int64_t pool_kernel, float* scores) {
  if (!cuda::SnapKvScoresSupported(kv.head_dim)) {
    std::fprintf(stderr, "kvserve: SnapKV scores on CUDA need head_dim %% 4 == 0 and <= 256, got %lld\n",
                 static_cast<long long>(kv.head_dim));
    std::abort();
  }
  const int32_t* dpages = UploadPages(pages, len, kv.page_size);
  void* scratch = compress_.Get(cuda::SnapKvScratchBytes(len, w, kv.n_kv_heads, shape.n_heads));
  cuda::SnapKvScores(F32Pages(kv, kv.k), kv.log_w, dpages, window, scores, scratch, len, w, kv.page_size, kv.n_kv_heads,
                     kv.head_dim, shape.n_heads, shape.scale, pool_kernel, stream_);
}

void CudaBackend::ProjectedValueNorms(const PagedKv& kv, const int32_t* pages, int64_t first, int64_t len,
                                      const WeightView& wo, int64_t n_heads, float* norms, int64_t stride) {
  const __nv_bfloat16* w = weights_->Bf16(wo);
  const int32_t* dpages = UploadPages(pages, len, kv.page_size);
  cuda::ProjectedValueNorms(F32Pages(kv, kv.v), dpages, w, norms, first, len, kv.page_size, kv.n_kv_heads, kv.head_dim, n_heads,
                            wo.rows, stride, stream_);
}

void CudaBackend::CriticalKvScores(const float* base, const float* norms, int64_t norms_stride, int64_t heads,
                                   int64_t len, int64_t n_first, float eps, float* merged) {
  int32_t* first = nullptr;
  if (n_first > 0) {
    first = static_cast<int32_t*>(first_slots_.Get(sizeof(int32_t) * heads * n_first));
    TopKPerHead(base, heads, len, n_first, first);
  }
  cuda::CriticalKvMerge(base, norms, first, merged, heads, len, norms_stride, n_first, eps, stream_);
}

void CudaBackend::MergeEvictedWeights(const PagedKv& kv, const int32_t* pages, int64_t len, const int32_t* slots,
                                      int64_t k, float radius, bool merge_values, float* out_log_w) {
  if (!cuda::MergeEvictedWeightsSupported(kv.head_dim)) {
    std::fprintf(stderr, "kvserve: merging evicted weights on CUDA needs head_dim <= 384, got %lld\n",
                 static_cast<long long>(kv.head_dim));
    std::abort();
  }
  const int32_t* dpages = UploadPages(pages, len, kv.page_size);
  void* scratch =
      compress_.Get(cuda::MergeEvictedWeightsScratchBytes(len, k, kv.n_kv_heads, merge_values ? kv.head_dim : 0));
  cuda::MergeEvictedWeights(F32Pages(kv, kv.k), merge_values ? F32Pages(kv, kv.v) : nullptr, kv.log_w, dpages, slots,
                            out_log_w, scratch, len, k, radius, kv.page_size, kv.n_kv_heads, kv.head_dim, stream_);
}

void CudaBackend::CompactKv(const PagedKv& kv, const int32_t* pages, int64_t len, const int32_t* slots,
                            const float* new_log_w, int64_t k) {
  if (k <= 0) return;
  const int32_t* dpages = UploadPages(pages, len, kv.page_size);
  void* scratch = compress_.Get(cuda::CompactKvScratchBytes(k, kv.n_kv_heads, kv.head_dim));
  cuda::CompactKv(F32Pages(kv, kv.k), F32Pages(kv, kv.v), kv.log_w, dpages, slots, new_log_w, scratch, k, kv.page_size, kv.n_kv_heads,
                  kv.head_dim, stream_);
}

void CudaBackend::Attention(const PagedKv& kv, const AttentionBatch& batch, const AttentionShape& shape,
                            const float* q, float* out) {
  const int64_t group = shape.n_heads / kv.n_kv_heads;
  const int32_t n_tokens = batch.n_seqs > 0 ? batch.q_indptr[batch.n_seqs] : 0;
  if (n_tokens == 0) return;
  const bool fast = cuda::DecodeAttentionSupported(kv.head_dim, group) &&
                    cuda::PrefillAttentionSupported(kv.head_dim, group);
  AttentionPlanOptions opt;
  opt.tile_tokens = std::max<int64_t>(1, cuda::kPrefillTileRows / group);  // the generic kernel takes any group
  opt.target_splits = std::max<int64_t>(1, 4 * sms_ / kv.n_kv_heads);  // ~4 blocks per SM
  const AttentionPlan plan = PlanAttention(batch, opt);

  const int32_t n_pages = batch.page_indptr[batch.n_seqs];
  const size_t o_indptr = meta_.Add(batch.page_indptr, batch.n_seqs + 1);
  const size_t o_pages = meta_.Add(batch.page_indices, n_pages);
  const size_t o_seq = meta_.Add(plan.token_seq.data(), plan.token_seq.size());
  const size_t o_vis = meta_.Add(plan.token_visible.data(), plan.token_visible.size());
  const size_t o_splits = meta_.Add(plan.splits.data(), plan.splits.size());
  const size_t o_merges = meta_.Add(plan.merges.data(), plan.merges.size());
  const size_t o_tiles = meta_.Add(plan.tiles.data(), plan.tiles.size());
  const unsigned char* base = meta_.Send(meta_dev_, stream_);

  cuda::DevicePagedKv dkv;
  dkv.k = F32Pages(kv, kv.k);
  dkv.v = F32Pages(kv, kv.v);
  dkv.log_w = kv.log_w;
  dkv.page_indptr = reinterpret_cast<const int32_t*>(base + o_indptr);
  dkv.page_indices = reinterpret_cast<const int32_t*>(base + o_pages);
  dkv.page_size = static_cast<int32_t>(kv.page_size);
  dkv.n_kv_heads = static_cast<int32_t>(kv.n_kv_heads);
  dkv.head_dim = static_cast<int32_t>(kv.head_dim);
  const auto* token_seq = reinterpret_cast<const int32_t*>(base + o_seq);
  const auto* token_visible = reinterpret_cast<const int32_t*>(base + o_vis);
  if (!fast) {
    cuda::GenericAttention(dkv, q, token_seq, token_visible, out, n_tokens, shape.n_heads, shape.scale, stream_);
    return;
  }
  if (!plan.splits.empty()) {
    const int64_t n_splits = static_cast<int64_t>(plan.splits.size());
    const size_t o_bytes = sizeof(float) * n_splits * shape.n_heads * kv.head_dim;
    auto* part = static_cast<unsigned char*>(part_.Get(o_bytes + sizeof(float) * n_splits * shape.n_heads * 2));
    cuda::DecodeAttention(dkv, q, reinterpret_cast<const DecodeSplit*>(base + o_splits),
                          reinterpret_cast<const DecodeMerge*>(base + o_merges), reinterpret_cast<float*>(part),
                          reinterpret_cast<float*>(part + o_bytes), out, n_splits,
                          static_cast<int64_t>(plan.merges.size()), shape.n_heads, shape.scale, stream_);
  }
  if (!plan.tiles.empty()) {
    cuda::PrefillAttention(dkv, q, token_visible, reinterpret_cast<const PrefillTile*>(base + o_tiles), out,
                           static_cast<int64_t>(plan.tiles.size()), shape.n_heads, shape.scale, stream_);
  }
}

}  // namespace

std::unique_ptr<Backend> MakeCudaBackend(int device) { return std::make_unique<CudaBackend>(device); }

cudaStream_t CudaBackendStream(Backend& b) { return static_cast<CudaBackend&>(b).stream(); }

void CudaArgmaxRows(Backend& b, const float* logits, int32_t* host_ids, int64_t rows, int64_t vocab) {
  static_cast<CudaBackend&>(b).ArgmaxRows(logits, host_ids, rows, vocab);
}

void CudaTopKRows(Backend& b, const float* device_logits, int64_t rows, int64_t vocab, int64_t k, int32_t* host_ids,
                  float* host_vals) {
  static_cast<CudaBackend&>(b).TopKRows(device_logits, rows, vocab, k, host_ids, host_vals);
}

}  // namespace kvserve
