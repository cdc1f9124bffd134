// Paged prefill attention, FlashAttention-2 style on bf16 tensor cores (wmma 16x16x16, fp32
// accumulation). A block takes one tile of 64 rows for one KV head, where a row is a (query
// token, head of the group) pair, so K/V tiles are shared by the whole GQA group. Each of the
// 4 warps owns 16 rows. Per 64-key tile: K/V are gathered from their pages (fp32 -> bf16)
// into shared memory, S = Q K^T on tensor cores, the online softmax (with log_w and the causal
// mask) runs on S in shared memory, and O += P V on tensor cores. O lives in shared memory in
// fp32, which keeps the per-row rescaling simple (wmma fragments have no defined layout).
#include <mma.h>

#include <cfloat>

#include "kernels/attention_plan.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/smem_limit.h"

namespace kvserve::cuda {
namespace {

using namespace nvcuda;

constexpr int kRows = kPrefillTileRows;  // query rows per block
constexpr int kKeys = 64;                // keys per step
constexpr int kWarps = 4;                // 16 rows each
constexpr float kNegInf = -INFINITY;

// Leading dimensions padded against bank conflicts; each keeps wmma's 32-byte alignment.
template <int HD>
struct Smem {
  static constexpr int kLdQ = HD + 8;      // bf16
  static constexpr int kLdS = kKeys + 4;   // fp32
  static constexpr int kLdP = kKeys + 8;   // bf16
  static constexpr int kLdO = HD + 4;      // fp32
  static constexpr size_t kQ = 0;
  static constexpr size_t kK = kQ + sizeof(__nv_bfloat16) * kRows * kLdQ;
  static constexpr size_t kV = kK + sizeof(__nv_bfloat16) * kKeys * kLdQ;
  static constexpr size_t kS = kV + sizeof(__nv_bfloat16) * kKeys * kLdQ;
  static constexpr size_t kP = kS + sizeof(float) * kRows * kLdS;
  static constexpr size_t kO = kP + sizeof(__nv_bfloat16) * kRows * kLdP;
  static constexpr size_t kM = kO + sizeof(float) * kRows * kLdO;  // row max
  static constexpr size_t kL = kM + sizeof(float) * kRows;          // row sum
  static constexpr size_t kVis = kL + sizeof(float) * kRows;        // keys each row sees
  static constexpr size_t kSlot = kVis + sizeof(int) * kRows;       // slot of each key of the step
  static constexpr size_t kLw = kSlot + sizeof(int64_t) * kKeys;    // log_w of each key
  static constexpr size_t kBytes = kLw + sizeof(float) * kKeys;
};

template <int HD>
__global__ void __launch_bounds__(kWarps * 32)
PrefillTileKernel(DevicePagedKv kv,
                  const float* __restrict__ q,              // [n_tokens, n_heads, HD]
                  const int32_t* __restrict__ token_visible,  // [n_tokens]
                  const PrefillTile* __restrict__ tiles,    // [n_tiles]
                  float* __restrict__ out,                  // [n_tokens, n_heads, HD]
                  int group, float scale) {
  using S = Smem<HD>;
  extern __shared__ __align__(128) unsigned char smem[];
  auto* sq = reinterpret_cast<__nv_bfloat16*>(smem + S::kQ);   // [kRows, kLdQ]
  auto* sk = reinterpret_cast<__nv_bfloat16*>(smem + S::kK);   // [kKeys, kLdQ]
  auto* sv = reinterpret_cast<__nv_bfloat16*>(smem + S::kV);   // [kKeys, kLdQ]
  auto* ss = reinterpret_cast<float*>(smem + S::kS);           // [kRows, kLdS]
  auto* sp = reinterpret_cast<__nv_bfloat16*>(smem + S::kP);   // [kRows, kLdP]
  auto* so = reinterpret_cast<float*>(smem + S::kO);           // [kRows, kLdO]
  auto* sm = reinterpret_cast<float*>(smem + S::kM);           // [kRows]
  auto* sl = reinterpret_cast<float*>(smem + S::kL);           // [kRows]
  auto* svis = reinterpret_cast<int*>(smem + S::kVis);         // [kRows]
  auto* sslot = reinterpret_cast<int64_t*>(smem + S::kSlot);   // [kKeys]
  auto* slw = reinterpret_cast<float*>(smem + S::kLw);         // [kKeys]

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int g = blockIdx.y, n_kv = kv.n_kv_heads, n_heads = n_kv * group;
  const PrefillTile tile = tiles[blockIdx.x];
  const int32_t* pages = kv.page_indices + kv.page_indptr[tile.seq];
  const int64_t row = static_cast<int64_t>(n_kv) * HD;
  const int valid_rows = tile.n_tokens * group;

  // Row r is token tile.token_begin + r / group, head g * group + r % group.
  for (int i = tid; i < kRows * HD; i += blockDim.x) {
    const int r = i / HD, d = i % HD;
    float x = 0.0f;
    if (r < valid_rows) {
      const int64_t t = tile.token_begin + r / group, h = g * group + r % group;
      x = q[(t * n_heads + h) * HD + d] * scale;
    }
    sq[r * S::kLdQ + d] = __float2bfloat16(x);
    so[r * S::kLdO + d] = 0.0f;
  }
  for (int r = tid; r < kRows; r += blockDim.x) {
    sm[r] = kNegInf;
    sl[r] = 0.0f;
    svis[r] = r < valid_rows ? token_visible[tile.token_begin + r / group] : 0;
  }

  const int r0 = warp * 16;  // this warp's first row
  for (int kb = 0; kb < tile.kv_end; kb += kKeys) {
    __syncthreads();  // the previous step's K/V/slots are no longer read
    for (int jj = tid; jj < kKeys; jj += blockDim.x) {
      const int j = kb + jj;
      int64_t slot = -1;
      float lw = kNegInf;
      if (j < tile.kv_end) {
        slot = static_cast<int64_t>(pages[j / kv.page_size]) * kv.page_size + j % kv.page_size;
        lw = kv.log_w[slot * n_kv + g];
      }
      sslot[jj] = slot;
      slw[jj] = lw;
    }
    __syncthreads();
    for (int i = tid; i < kKeys * HD; i += blockDim.x) {
      const int jj = i / HD, d = i % HD;
      const int64_t slot = sslot[jj];
      float kx = 0.0f, vx = 0.0f;
      if (slot >= 0) {
        kx = kv.k[slot * row + g * HD + d];
        vx = kv.v[slot * row + g * HD + d];
      }
      sk[jj * S::kLdQ + d] = __float2bfloat16(kx);
      sv[jj * S::kLdQ + d] = __float2bfloat16(vx);
    }
    __syncthreads();

    // S[16 rows, 64 keys] = Q K^T for this warp's rows.
    for (int nt = 0; nt < kKeys / 16; ++nt) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
      wmma::fill_fragment(c, 0.0f);
#pragma unroll
      for (int kt = 0; kt < HD / 16; ++kt) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b;
        wmma::load_matrix_sync(a, sq + r0 * S::kLdQ + kt * 16, S::kLdQ);
        wmma::load_matrix_sync(b, sk + nt * 16 * S::kLdQ + kt * 16, S::kLdQ);
        wmma::mma_sync(c, a, b, c);
      }
      wmma::store_matrix_sync(ss + r0 * S::kLdS + nt * 16, c, S::kLdS, wmma::mem_row_major);
    }
    __syncwarp();

    // Online softmax: two lanes per row, 32 keys each.
    {
      const int r = r0 + lane / 2, half = lane % 2;
      const int vis = svis[r];
      float s[kKeys / 2];
      float mx = kNegInf;
#pragma unroll
      for (int i = 0; i < kKeys / 2; ++i) {
        const int jj = half * (kKeys / 2) + i;
        s[i] = kb + jj < vis ? ss[r * S::kLdS + jj] + slw[jj] : kNegInf;
        mx = fmaxf(mx, s[i]);
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      const float m_old = sm[r];
      const float new_m = fmaxf(m_old, mx);
      float alpha = 1.0f, sum = 0.0f;
      if (new_m != kNegInf) alpha = __expf(m_old - new_m);
#pragma unroll
      for (int i = 0; i < kKeys / 2; ++i) {
        const float p = new_m == kNegInf ? 0.0f : __expf(s[i] - new_m);
        const __nv_bfloat16 pb = __float2bfloat16(p);
        sp[r * S::kLdP + half * (kKeys / 2) + i] = pb;
        sum += __bfloat162float(pb);  // the sum of the weights the P V product really uses
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      for (int d = half * (HD / 2); d < (half + 1) * (HD / 2); ++d) so[r * S::kLdO + d] *= alpha;
      __syncwarp();  // both lanes of the pair have read sm[r]
      if (half == 0) {
        sm[r] = new_m;
        sl[r] = sl[r] * alpha + sum;
      }
    }
    __syncwarp();

    // O[16 rows, HD] += P[16, 64] V[64, HD].
    for (int dt = 0; dt < HD / 16; ++dt) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
      wmma::load_matrix_sync(c, so + r0 * S::kLdO + dt * 16, S::kLdO, wmma::mem_row_major);
#pragma unroll
      for (int kt = 0; kt < kKeys / 16; ++kt) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> b;
        wmma::load_matrix_sync(a, sp + r0 * S::kLdP + kt * 16, S::kLdP);
        wmma::load_matrix_sync(b, sv + kt * 16 * S::kLdQ + dt * 16, S::kLdQ);
        wmma::mma_sync(c, a, b, c);
      }
      wmma::store_matrix_sync(so + r0 * S::kLdO + dt * 16, c, S::kLdO, wmma::mem_row_major);
    }
  }
  __syncthreads();

  for (int i = tid; i < valid_rows * HD; i += blockDim.x) {
    const int r = i / HD, d = i % HD;
    const int64_t t = tile.token_begin + r / group, h = g * group + r % group;
    const float l = sl[r];
    out[(t * n_heads + h) * HD + d] = l > 0.0f ? so[r * S::kLdO + d] / l : 0.0f;
  }
}

template <int HD>
void Launch(const DevicePagedKv& kv, const float* q, const int32_t* token_visible, const PrefillTile* tiles,
            float* out, int64_t n_tiles, int group, float scale, cudaStream_t stream) {
  constexpr size_t bytes = Smem<HD>::kBytes;
  AllowDynamicSharedMemory(PrefillTileKernel<HD>, bytes);
  const dim3 grid(static_cast<unsigned>(n_tiles), static_cast<unsigned>(kv.n_kv_heads));
  PrefillTileKernel<HD><<<grid, kWarps * 32, bytes, stream>>>(kv, q, token_visible, tiles, out, group, scale);
  KVSERVE_LAUNCH_CHECK();
}

}  // namespace

bool PrefillAttentionSupported(int64_t head_dim, int64_t group) {
  return (head_dim == 64 || head_dim == 128) && group >= 1 && group <= kRows;
}

void PrefillAttention(const DevicePagedKv& kv, const float* q, const int32_t* token_visible, const PrefillTile* tiles,
                      float* out, int64_t n_tiles, int64_t n_heads, float scale, cudaStream_t stream) {
  if (n_tiles <= 0) return;
  const int group = static_cast<int>(n_heads / kv.n_kv_heads);
  if (kv.head_dim == 64) {
    Launch<64>(kv, q, token_visible, tiles, out, n_tiles, group, scale, stream);
  } else {
    Launch<128>(kv, q, token_visible, tiles, out, n_tiles, group, scale, stream);
  }
}

}  // namespace kvserve::cuda
