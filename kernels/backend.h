// The op interface every compute backend implements; cpu/ is the always-built reference.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "kernels/dtype.h"

namespace kvserve {

// A read-only weight matrix [rows, cols], row-major: row r starts at
// data + r * RowBytes(dtype, cols). A vector is a matrix with rows == 1.
struct WeightView {
  DType dtype = DType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  const void* data = nullptr;
};

// KV storage in pages. A page holds page_size tokens of one layer. Kernels see only this
// plain view plus an AttentionBatch; they never see the allocator.
// K and V are stored as dtype: kF32, or kF16 at half the bytes (CPU backend only; fp16 keeps
// 11 significant bits, ample for post-RoPE keys and values, and is llama.cpp's default too).
// Host code reads and writes rows through kernels/kv_rows.h, which handles both.
struct PagedKv {
  void* k = nullptr;       // [num_pages, page_size, n_kv_heads, head_dim] of dtype
  void* v = nullptr;       // [num_pages, page_size, n_kv_heads, head_dim] of dtype
  float* log_w = nullptr;  // [num_pages, page_size, n_kv_heads], added to the attention logit
  int64_t page_size = 16;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  DType dtype = DType::kF32;

  int64_t ElementBytes() const { return RowBytes(dtype, 1); }
};

// One forward step's sequences, in CSR form. Sequence s owns query rows
// [q_indptr[s], q_indptr[s+1]) and the pages page_indices[page_indptr[s] .. page_indptr[s+1]).
// kv_len[s] counts its KV slots including this step's new ones, which are the last
// n_q = q_indptr[s+1] - q_indptr[s] slots; query i (0-based within s) sees slots
// [0, kv_len[s] - n_q + i] (causal over the new tokens, everything before them).
struct AttentionBatch {
  int32_t n_seqs = 0;
  const int32_t* q_indptr = nullptr;      // [n_seqs + 1]
  const int32_t* page_indptr = nullptr;   // [n_seqs + 1]
  const int32_t* page_indices = nullptr;  // [page_indptr[n_seqs]]
  const int32_t* kv_len = nullptr;        // [n_seqs]
};

struct AttentionShape {
  int64_t n_heads = 0;     // query heads; a multiple of PagedKv::n_kv_heads (GQA)
  float scale = 1.0f;      // usually 1/sqrt(head_dim)
};

// Where op arguments live. Float tensors an op reads or writes (activations, PagedKv pages)
// are in the backend's memory: host memory for the CPU backend, device memory for CUDA, made
// with Allocate and filled with CopyIn. Parameters (WeightView::data, gain, bias, inv_freq)
// and integer metadata (tokens, positions, AttentionBatch arrays) are always host memory; a
// device backend copies them itself, caching weights by address, so weights must stay alive
// and unchanged while the backend uses them.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view Name() const = 0;

  // True when Allocate returns ordinary host memory (then the copies are memcpy).
  virtual bool HostMemory() const { return true; }
  // bytes of zero-filled backend memory; nullptr for 0 bytes. Release with Deallocate.
  virtual void* Allocate(int64_t bytes);
  virtual void Deallocate(void* p);
  // dst (backend memory) = host_src; src (backend memory) -> host_dst, complete on return;
  // and a copy within backend memory.
  virtual void CopyIn(void* dst, const void* host_src, int64_t bytes);
  virtual void CopyOut(void* host_dst, const void* src, int64_t bytes);
  virtual void Copy(void* dst, const void* src, int64_t bytes);
  // Free bytes of the backend's memory, what a fractional --kv-memory is a share of; -1 for
  // host memory, whose free bytes the caller reads from the OS (kv_memory.h).
  virtual int64_t FreeMemoryBytes() { return -1; }

  // out[n, table.cols] = rows tokens[i] of table.
  virtual void Embed(const WeightView& table, const int32_t* tokens, int64_t n, float* out) = 0;

  // out[n, dim] = x[n, dim] / rms(x) * gain[dim]. out may alias x.
  virtual void RmsNorm(const float* x, const float* gain, float* out, int64_t n, int64_t dim,
                       float eps) = 0;

  // y[n, w.rows] = x[n, w.cols] * w^T, fp32 accumulation.
  virtual void MatMul(const WeightView& w, const float* x, float* y, int64_t n) = 0;

  // For each i < count: ys[i][n, ws[i].rows] = x[n, ws[i].cols] * ws[i]^T, one input shared
  // (q/k/v, gate/up). The default calls MatMul per weight; a backend may fuse them.
  virtual void MatMulShared(const WeightView* ws, float* const* ys, int64_t count, const float* x, int64_t n);

  // y[n, dim] += bias[dim].
  virtual void AddBias(float* y, const float* bias, int64_t n, int64_t dim) = 0;

  // Rotates x[n, n_heads, head_dim] in place at positions[n]. inv_freq[rot_dim / 2] holds
  // the (possibly scaled) inverse frequencies. neox pairs dim i with i + rot_dim/2 (HF
  // layout); otherwise pairs are adjacent (GGUF llama layout).
  virtual void Rope(float* x, const int32_t* positions, int64_t n, int64_t n_heads,
                    int64_t head_dim, const float* inv_freq, int64_t rot_dim, bool neox) = 0;

  // Writes this step's new k, v [n_tokens, n_kv_heads, head_dim] into the last slots of
  // each sequence (see AttentionBatch) with log-weight 0.
  virtual void WriteKv(const PagedKv& kv, const AttentionBatch& batch, const float* k,
                       const float* v) = 0;

  // out[n_tokens, n_heads, head_dim] = softmax(q k^T * scale + log_w) v over the paged KV.
  virtual void Attention(const PagedKv& kv, const AttentionBatch& batch, const AttentionShape& shape,
                         const float* q, float* out) = 0;

  // out[n] = silu(gate[n]) * up[n]. out may alias gate.
  virtual void SwiGlu(const float* gate, const float* up, float* out, int64_t n) = 0;

  // x[n] += y[n].
  virtual void Add(float* x, const float* y, int64_t n) = 0;

  // --- KV compression: scoring, per-head selection and compaction of one sequence's layer.
  // `pages` (host memory, like every integer table) is the layer's page list in slot order,
  // len its slots in use; slot s of head h is page pages[s / page_size], offset s % page_size.
  // Float tensors and the int32 `slots` are backend memory. Every backend implements them
  // (the CPU backend with kernels/cpu, CUDA with kernels/cuda), so a layer is compressed
  // where its pages are; engine/compress orchestrates them the same way for both.

  // scores [n_kv_heads, len]: SnapKV over window [w, n_heads, head_dim] (the last w queries,
  // post-RoPE, 1 <= w <= len; the last is the query of slot len - 1). See SnapKvScores in
  // kernels/cpu/kv_compress_ops.h (the reference) for the exact definition.
  virtual void SnapKvScores(const PagedKv& kv, const int32_t* pages, int64_t len, const float* window, int64_t w,
                            const AttentionShape& shape, int64_t pool_kernel, float* scores) = 0;

  // norms [n_kv_heads, stride], columns [first, len) written: the mean over the KV head's
  // query heads h of ||v_s W_O^h||_1, W_O = wo [hidden, n_heads * head_dim] (a parameter,
  // host memory like every weight).
  virtual void ProjectedValueNorms(const PagedKv& kv, const int32_t* pages, int64_t first, int64_t len,
                                   const WeightView& wo, int64_t n_heads, float* norms, int64_t stride) = 0;

  // merged [heads, len]: CriticalKV's two-stage score. The n_first best entries of each head by
  // base [heads, len] score FLT_MAX (stage 1); every other entry (base + eps) * norms, with
  // norms [heads, norms_stride].
  virtual void CriticalKvScores(const float* base, const float* norms, int64_t norms_stride, int64_t heads,
                                int64_t len, int64_t n_first, float eps, float* merged) = 0;

  // slots [heads, k]: per head the k best entries of scores [heads, len] (1 <= k <= len), in
  // ascending slot order. Higher score first; equal scores go to the lower slot.
  virtual void TopKPerHead(const float* scores, int64_t heads, int64_t len, int64_t k, int32_t* slots) = 0;

  // For every KV head h and i < k: K, V of slot slots[h, i] move to slot i, with log-weight
  // new_log_w[h, i] ([n_kv_heads, k]), or the entry's own when new_log_w is null. slots
  // ascend per head. Slots past k are left undefined: the caller frees the pages past them.
  virtual void CompactKv(const PagedKv& kv, const int32_t* pages, int64_t len, const int32_t* slots,
                         const float* new_log_w, int64_t k) = 0;

  // out_log_w [n_kv_heads, k] (backend memory): the log-weights the kept slots [n_kv_heads, k]
  // (ascending per head) take when the evicted entries' weight is merged into them: each
  // entry of the layer adds its weight exp(log_w) to the kept entry of its head with the
  // nearest key (itself when kept), an evicted one only when that key is within radius times
  // its own norm (+inf: always). merge_values: each kept entry's V also becomes the weighted
  // mean of the values merged into it (written in place, before the compaction). See
  // MergeEvictedWeights in kernels/cpu/kv_compress_ops.h.
  virtual void MergeEvictedWeights(const PagedKv& kv, const int32_t* pages, int64_t len, const int32_t* slots,
                                   int64_t k, float radius, bool merge_values, float* out_log_w) = 0;

  // dst[h, i] = src[h, slots[h, i]] for h < heads, i < k; src [heads, src_stride], dst
  // [heads, dst_stride], slots [heads, k]. dst must not overlap src. (Per-entry side data,
  // such as cached value norms, follows its entries through a compaction.)
  virtual void GatherPerHead(const float* src, int64_t src_stride, const int32_t* slots, int64_t heads, int64_t k,
                             float* dst, int64_t dst_stride) = 0;
};

// How much a backend may let a token's arithmetic depend on the batch it is computed in.
enum class Determinism {
  // The fastest kernel for each batch shape (sgemm for many tokens, key splits sized to the
  // thread count): a token's logits may differ in the last bits with what else is batched and
  // how its prompt is chunked, which can flip a greedy token at a near-tie.
  kFastest,
  // One kernel and one reduction order per token for every batch shape (`--deterministic`):
  // a token's outputs are bit-identical whatever else is batched and however its prompt is
  // chunked, on the same machine, build and kernel ISA. Slower prefill.
  kBatchInvariant,
};

std::unique_ptr<Backend> MakeCpuBackend(Determinism determinism = Determinism::kFastest);
// The instruction set the CPU backend's kernels run with ("avx2" or "avx512"; chosen once per
// process, KVSERVE_CPU_ISA forces one).
std::string_view CpuKernelIsa();
// The cache level the CPU attention loops prefetch K/V rows into ("nta", "l1" or "l2"; by CPU,
// KVSERVE_PREFETCH_KV_LEVEL forces one).
std::string_view CpuKvPrefetchLevel();
// The level and distance the CPU quantized dots prefetch weight rows with, as "LEVEL/BYTES"
// ("l1/8640"; by CPU, KVSERVE_PREFETCH_WEIGHT_LEVEL and _BYTES force them).
std::string CpuWeightPrefetch();
// How the CPU kernels' OpenMP threads wait at barriers, as the environment gave it to libgomp
// at load ("GOMP_SPINCOUNT=30000", "OMP_WAIT_POLICY=passive", or "libgomp default"): speed on
// shared cores depends on it (scripts/openmp_defaults.sh).
std::string CpuOpenMpWait();

}  // namespace kvserve
