// The op interface every compute backend implements; cpu/ is the always-built reference.
#pragma once
#include <cstdint>
#include <memory>
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
struct PagedKv {
  float* k = nullptr;      // [num_pages, page_size, n_kv_heads, head_dim]
  float* v = nullptr;      // [num_pages, page_size, n_kv_heads, head_dim]
  float* log_w = nullptr;  // [num_pages, page_size, n_kv_heads], added to the attention logit
  int64_t page_size = 16;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
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

  // out[n, table.cols] = rows tokens[i] of table.
  virtual void Embed(const WeightView& table, const int32_t* tokens, int64_t n, float* out) = 0;

  // out[n, dim] = x[n, dim] / rms(x) * gain[dim]. out may alias x.
  virtual void RmsNorm(const float* x, const float* gain, float* out, int64_t n, int64_t dim,
                       float eps) = 0;

  // y[n, w.rows] = x[n, w.cols] * w^T, fp32 accumulation.
  virtual void MatMul(const WeightView& w, const float* x, float* y, int64_t n) = 0;

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
};

std::unique_ptr<Backend> MakeCpuBackend();

}  // namespace kvserve
