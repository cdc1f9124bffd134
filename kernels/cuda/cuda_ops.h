// The CUDA kernels behind CudaBackend, one op family per .cu file; each launcher runs on
// `stream` and checks the launch. Pointers are device memory unless marked host.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

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
