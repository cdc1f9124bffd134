// The CUDA kernels behind CudaBackend, one op family per .cu file; each launcher runs on
// `stream` and checks the launch. Pointers are device memory unless marked host.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace kvserve::cuda {

// elementwise.cu
void F32ToBf16(const float* x,          // [n]
               __nv_bfloat16* y,        // [n]
               int64_t n, cudaStream_t stream);
void EmbedBf16(const __nv_bfloat16* table,  // [vocab, dim]
               const int32_t* tokens,       // [n]
               float* out,                  // [n, dim]
               int64_t n, int64_t dim, cudaStream_t stream);
void AddBias(float* y,            // [n, dim]
             const float* bias,   // [dim]
             int64_t n, int64_t dim, cudaStream_t stream);
void SwiGlu(const float* gate,  // [n]
            const float* up,    // [n]
            float* out,         // [n], may alias gate
            int64_t n, cudaStream_t stream);
void Add(float* x,        // [n]
         const float* y,  // [n]
         int64_t n, cudaStream_t stream);

// rms_norm.cu
void RmsNorm(const float* x,     // [n, dim]
             const float* gain,  // [dim]
             float* out,         // [n, dim], may alias x
             int64_t n, int64_t dim, float eps, cudaStream_t stream);

// rope.cu
void Rope(float* x,                // [n, n_heads, head_dim], rotated in place
          const int32_t* positions,  // [n]
          const float* inv_freq,     // [rot_dim / 2]
          int64_t n, int64_t n_heads, int64_t head_dim, int64_t rot_dim, bool neox,
          cudaStream_t stream);

// kv_write.cu
void WriteKv(float* k_pages,        // [num_pages, page_size, n_kv_heads, head_dim]
             float* v_pages,        // [num_pages, page_size, n_kv_heads, head_dim]
             float* log_w,          // [num_pages, page_size, n_kv_heads]
             const int32_t* slots,  // [n_tokens]: global slot (page * page_size + offset) of each new token
             const float* k,        // [n_tokens, n_kv_heads, head_dim]
             const float* v,        // [n_tokens, n_kv_heads, head_dim]
             int64_t n_tokens, int64_t n_kv_heads, int64_t head_dim, cudaStream_t stream);

// sampling.cu
void ArgmaxRows(const float* logits,  // [rows, vocab]
                int32_t* out,         // [rows]
                int64_t rows, int64_t vocab, cudaStream_t stream);

// sampling_topk.cu: the k best of each row, value descending and equal values by lower id
// (NaN as -inf; -0.0 comes back as +0.0), as cpu::RowTopK. 1 <= k <= min(kTopKRowsMaxK,
// vocab), vocab < 2^31. The cap is one candidate per thread of the row's block; top-k
// sampling asks for top_k + 1, and API top_k values are far below it.
constexpr int64_t kTopKRowsMaxK = 1024;
void TopKRows(const float* logits,  // [rows, vocab]
              int32_t* ids,         // [rows, k]
              float* vals,          // [rows, k]
              int64_t rows, int64_t vocab, int64_t k, cudaStream_t stream);

// --- KV compression (one layer of one sequence; `pages` is its page list in slot order, so
// slot s of KV head h is row (pages[s / page_size] * page_size + s % page_size) * n_kv_heads + h).
// The CPU references with the same shapes are in kernels/cpu/kv_compress_ops.h.

// snapkv_scores.cu: SnapKV window scores in fp32. Two passes over the keys (softmax max and
// denominator per (window query, head) online, then the normalized probabilities summed per
// key), so no [w, len, heads] tensor exists; then the pool and the window entries' score.
// head_dim % 4 == 0 and head_dim <= 256.
bool SnapKvScoresSupported(int64_t head_dim);
size_t SnapKvScratchBytes(int64_t len, int64_t w, int64_t n_kv_heads, int64_t n_heads);
void SnapKvScores(const float* k_pages,  // [num_pages, page_size, n_kv_heads, head_dim]
                  const float* log_w,    // [num_pages, page_size, n_kv_heads]
                  const int32_t* pages,  // [ceil(len / page_size)]
                  const float* window,   // [w, n_heads, head_dim], the last w queries
                  float* scores,         // [n_kv_heads, len]
                  void* scratch,         // [SnapKvScratchBytes(...)] bytes
                  int64_t len, int64_t w, int64_t page_size, int64_t n_kv_heads, int64_t head_dim, int64_t n_heads,
                  float scale, int64_t pool_kernel, cudaStream_t stream);

// value_norms.cu: CriticalKV's projected value norms, v (as bf16) times W_O^h on tensor cores
// (wmma 16x16x16, fp32 accumulate) with |.| summed from each tile as it is produced, so the
// [n, hidden] product is never written; head_dim 64 or 128 and hidden % 16 == 0, else an fp32
// CUDA-core kernel.
void ProjectedValueNorms(const float* v_pages,      // [num_pages, page_size, n_kv_heads, head_dim]
                         const int32_t* pages,      // [ceil(len / page_size)]
                         const __nv_bfloat16* wo,   // [hidden, n_heads * head_dim]
                         float* norms,              // [n_kv_heads, stride], columns [first, len) written
                         int64_t first, int64_t len, int64_t page_size, int64_t n_kv_heads, int64_t head_dim,
                         int64_t n_heads, int64_t hidden, int64_t stride, cudaStream_t stream);
// value_norms.cu: merged = (base + eps) * norms, then FLT_MAX at each head's stage-1 slots.
void CriticalKvMerge(const float* base,          // [heads, len]
                     const float* norms,         // [heads, norms_stride]
                     const int32_t* first_slots, // [heads, n_first], may be null when n_first == 0
                     float* merged,              // [heads, len]
                     int64_t heads, int64_t len, int64_t norms_stride, int64_t n_first, float eps,
                     cudaStream_t stream);

// topk_per_head.cu: per-head top-k with CUB: one radix sort of (head, score descending,
// slot) keys over all heads at once (ties keep the lower slot first), then the kept slots
// flagged and compacted in ascending order.
size_t TopKScratchBytes(int64_t heads, int64_t len);
void TopKPerHead(const float* scores,  // [heads, len]
                 int32_t* slots,       // [heads, k], ascending per head
                 void* scratch,        // [TopKScratchBytes(heads, len)] bytes
                 int64_t heads, int64_t len, int64_t k, cudaStream_t stream);

// kv_compaction.cu: each head's kept entries to its leading slots, through a scratch of at
// most kCompactChunk slots at a time (chunks run in order, and kept slots ascend, so a chunk
// never overwrites an entry a later chunk reads).
constexpr int64_t kCompactChunk = 4096;
size_t CompactKvScratchBytes(int64_t k, int64_t n_kv_heads, int64_t head_dim);
void CompactKv(float* k_pages,           // [num_pages, page_size, n_kv_heads, head_dim]
               float* v_pages,           // [num_pages, page_size, n_kv_heads, head_dim]
               float* log_w,             // [num_pages, page_size, n_kv_heads]
               const int32_t* pages,     // [ceil(len / page_size)]
               const int32_t* slots,     // [n_kv_heads, k], ascending per head
               const float* new_log_w,   // [n_kv_heads, k], or null: each entry keeps its own
               void* scratch,            // [CompactKvScratchBytes(k, n_kv_heads, head_dim)] bytes
               int64_t k, int64_t page_size, int64_t n_kv_heads, int64_t head_dim, cudaStream_t stream);
// evicted_mass.cu: the log-weights the kept slots take when every evicted entry's weight
// goes to the kept entry of its head with the nearest key (MergeEvictedWeights in
// kernels/cpu/kv_compress_ops.h; radius bounds the distance an evicted key may be merged
// across, relative to its norm, +inf none). Needs MergeEvictedWeightsSupported(head_dim).
// v_pages non-null: each kept entry's V also becomes the weighted mean of the values merged
// into it (merge_values there); the scratch then needs value_dim = head_dim, else 0.
size_t MergeEvictedWeightsScratchBytes(int64_t len, int64_t k, int64_t n_kv_heads, int64_t value_dim);
bool MergeEvictedWeightsSupported(int64_t head_dim);
void MergeEvictedWeights(const float* k_pages,    // [num_pages, page_size, n_kv_heads, head_dim]
                         float* v_pages,          // the same shape, or null: weights only
                         const float* log_w,      // [num_pages, page_size, n_kv_heads]
                         const int32_t* pages,    // [ceil(len / page_size)]
                         const int32_t* slots,    // [n_kv_heads, k], ascending per head
                         float* out_log_w,        // [n_kv_heads, k]
                         void* scratch,           // [MergeEvictedWeightsScratchBytes(len, k, n_kv_heads, ...)] bytes
                         int64_t len, int64_t k, float radius, int64_t page_size, int64_t n_kv_heads,
                         int64_t head_dim, cudaStream_t stream);
// kv_compaction.cu: dst[h, i] = src[h, slots[h, i]].
void GatherPerHead(const float* src,      // [heads, src_stride]
                   const int32_t* slots,  // [heads, k]
                   float* dst,            // [heads, dst_stride], not overlapping src
                   int64_t heads, int64_t k, int64_t src_stride, int64_t dst_stride, cudaStream_t stream);

}  // namespace kvserve::cuda

namespace kvserve {
struct DecodeSplit;
struct DecodeMerge;
struct PrefillTile;
}  // namespace kvserve

namespace kvserve::cuda {

// The paged KV of one layer and the batch's page tables, all device memory.
struct DevicePagedKv {
  const float* k = nullptr;               // [num_pages, page_size, n_kv_heads, head_dim]
  const float* v = nullptr;               // [num_pages, page_size, n_kv_heads, head_dim]
  const float* log_w = nullptr;           // [num_pages, page_size, n_kv_heads]
  const int32_t* page_indptr = nullptr;   // [n_seqs + 1]
  const int32_t* page_indices = nullptr;  // [page_indptr[n_seqs]]
  int32_t page_size = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
};

// decode_attention.cu: flash-decoding. True when (head_dim, group) has a specialized kernel.
bool DecodeAttentionSupported(int64_t head_dim, int64_t group);
void DecodeAttention(const DevicePagedKv& kv,
                     const float* q,                  // [n_tokens, n_heads, head_dim]
                     const DecodeSplit* splits,       // [n_splits]
                     const DecodeMerge* merges,       // [n_merges]
                     float* part_o,                   // [n_splits, n_heads, head_dim] scratch
                     float* part_ml,                  // [n_splits, n_heads, 2] scratch
                     float* out,                      // [n_tokens, n_heads, head_dim]
                     int64_t n_splits, int64_t n_merges, int64_t n_heads, float scale, cudaStream_t stream);

// prefill_attention.cu: tiled FlashAttention-2 style on bf16 tensor cores (wmma).
constexpr int kPrefillTileRows = 64;  // (query token, head of the group) rows per tile
bool PrefillAttentionSupported(int64_t head_dim, int64_t group);
void PrefillAttention(const DevicePagedKv& kv,
                      const float* q,                    // [n_tokens, n_heads, head_dim]
                      const int32_t* token_visible,      // [n_tokens] keys each query row sees
                      const PrefillTile* tiles,          // [n_tiles]
                      float* out,                        // [n_tokens, n_heads, head_dim]
                      int64_t n_tiles, int64_t n_heads, float scale, cudaStream_t stream);

// generic_attention.cu: any head_dim <= 256 and any group; one block per (token, head).
void GenericAttention(const DevicePagedKv& kv,
                      const float* q,                    // [n_tokens, n_heads, head_dim]
                      const int32_t* token_seq,          // [n_tokens]
                      const int32_t* token_visible,      // [n_tokens]
                      float* out,                        // [n_tokens, n_heads, head_dim]
                      int64_t n_tokens, int64_t n_heads, float scale, cudaStream_t stream);

}  // namespace kvserve::cuda
