// Paged attention against a plain contiguous attention written out in the test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/kv_rows.h"
#include "tests/kernels/cpu/cpu_isas.h"
#include "tests/kernels/cpu/random_blocks.h"

namespace kvserve::cpu {
namespace {

struct Seq {
  int64_t n_q, kv_len;  // kv_len includes the n_q new tokens
};

// out[t, h, :] for one sequence: contiguous K/V [kv_len, n_kv, hd], lw [kv_len, n_kv].
void ContiguousAttention(const std::vector<float>& q, const std::vector<float>& k,
                         const std::vector<float>& v, const std::vector<float>& lw, Seq s,
                         int64_t n_heads, int64_t n_kv, int64_t hd, float scale,
                         std::vector<float>* out) {
  out->assign(s.n_q * n_heads * hd, 0.0f);
  for (int64_t i = 0; i < s.n_q; ++i) {
    const int64_t visible = s.kv_len - s.n_q + i + 1;
    for (int64_t h = 0; h < n_heads; ++h) {
      const int64_t g = h / (n_heads / n_kv);
      std::vector<double> p(visible);
      double mx = -1e30;
      for (int64_t j = 0; j < visible; ++j) {
        double d = 0;
        for (int64_t e = 0; e < hd; ++e) d += q[(i * n_heads + h) * hd + e] * k[(j * n_kv + g) * hd + e];
        p[j] = d * scale + lw[j * n_kv + g];
        mx = std::max(mx, p[j]);
      }
      double sum = 0;
      for (double& x : p) sum += (x = std::exp(x - mx));
      for (int64_t j = 0; j < visible; ++j) {
        for (int64_t e = 0; e < hd; ++e) {
          (*out)[(i * n_heads + h) * hd + e] += static_cast<float>(p[j] / sum * v[(j * n_kv + g) * hd + e]);
        }
      }
    }
  }
}

struct Params {
  int64_t page_size, n_heads, n_kv, hd;
  DType kv_dtype = DType::kF32;
};

class PagedAttentionTest : public ::testing::TestWithParam<Params> {};

// Pages in scattered order, or (in_order) consecutive ids, which the kernel walks as one run.
void ExpectEqualsContiguousReference(const Params& params, const std::vector<Seq>& seqs, bool in_order = false) {
  const auto [page_size, n_heads, n_kv, hd, kv_dtype] = params;
  const int64_t row = n_kv * hd;
  int64_t total_pages = 0;
  for (const Seq& s : seqs) total_pages += (s.kv_len + page_size - 1) / page_size;
  std::vector<int32_t> perm(total_pages);
  std::iota(perm.begin(), perm.end(), 0);
  if (!in_order) std::shuffle(perm.begin(), perm.end(), std::mt19937(5));

  std::vector<uint8_t> k_pool(total_pages * page_size * RowBytes(kv_dtype, row)), v_pool(k_pool.size());
  std::vector<float> lw_pool(total_pages * page_size * n_kv);
  PagedKv kv{k_pool.data(), v_pool.data(), lw_pool.data(), page_size, n_kv, hd, kv_dtype};
  std::vector<int32_t> q_indptr{0}, page_indptr{0}, page_indices, kv_len;
  std::vector<float> q_all, new_k, new_v;
  std::vector<std::vector<float>> ks, vs, lws, qs;
  uint32_t seed = 1;
  for (const Seq& s : seqs) {
    ks.push_back(kvserve::testing::RandomFloats(s.kv_len * row, seed++));
    vs.push_back(kvserve::testing::RandomFloats(s.kv_len * row, seed++));
    if (kv_dtype == DType::kF16) {  // the reference sees what the pages hold
      for (float& x : ks.back()) x = Fp16ToFp32(Fp32ToFp16(x));
      for (float& x : vs.back()) x = Fp16ToFp32(Fp32ToFp16(x));
    }
    lws.push_back(kvserve::testing::RandomFloats(s.kv_len * n_kv, seed++, 2.0f));
    qs.push_back(kvserve::testing::RandomFloats(s.n_q * n_heads * hd, seed++));
    const int64_t np = (s.kv_len + page_size - 1) / page_size;
    for (int64_t p = 0; p < np; ++p) page_indices.push_back(perm[page_indices.size()]);
    page_indptr.push_back(static_cast<int32_t>(page_indices.size()));
    q_indptr.push_back(q_indptr.back() + static_cast<int32_t>(s.n_q));
    kv_len.push_back(static_cast<int32_t>(s.kv_len));
    q_all.insert(q_all.end(), qs.back().begin(), qs.back().end());
    // The prefix goes straight into pages; the new tokens through WriteKv.
    const int32_t* pages = page_indices.data() + page_indptr[page_indptr.size() - 2];
    for (int64_t j = 0; j < s.kv_len - s.n_q; ++j) {
      const int64_t slot = pages[j / page_size] * page_size + j % page_size;
      for (int64_t h = 0; h < n_kv; ++h) {
        WriteKvRow(kv, kv.k, slot * n_kv + h, ks.back().data() + j * row + h * hd);
        WriteKvRow(kv, kv.v, slot * n_kv + h, vs.back().data() + j * row + h * hd);
      }
      std::copy_n(lws.back().data() + j * n_kv, n_kv, lw_pool.data() + slot * n_kv);
    }
    new_k.insert(new_k.end(), ks.back().end() - s.n_q * row, ks.back().end());
    new_v.insert(new_v.end(), vs.back().end() - s.n_q * row, vs.back().end());
    // WriteKv sets the new entries' log-weights to 0; the reference must agree.
    std::fill(lws.back().end() - s.n_q * n_kv, lws.back().end(), 0.0f);
  }
  AttentionBatch batch{static_cast<int32_t>(seqs.size()), q_indptr.data(), page_indptr.data(),
                       page_indices.data(), kv_len.data()};
  WriteKv(kv, batch, new_k.data(), new_v.data());
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (CpuIsa isa : kvserve::testing::IsasThisCpuRuns()) {
    SCOPED_TRACE(kvserve::testing::IsaTrace(isa));
    ScopedCpuIsa use(isa);
    std::vector<float> out(q_all.size());
    PagedAttention(kv, batch, {n_heads, scale}, q_all.data(), out.data());
    for (size_t s = 0; s < seqs.size(); ++s) {
      std::vector<float> ref;
      ContiguousAttention(qs[s], ks[s], vs[s], lws[s], seqs[s], n_heads, n_kv, hd, scale, &ref);
      const float* got = out.data() + q_indptr[s] * n_heads * hd;
      for (size_t i = 0; i < ref.size(); ++i) {
        ASSERT_NEAR(got[i], ref[i], 2e-5f) << "seq " << s << " element " << i;
      }
    }
  }
}

TEST_P(PagedAttentionTest, EqualsContiguousReference) {
  const int64_t ps = GetParam().page_size;
  // Prefill chunks, decode steps, and lengths on both sides of page boundaries; {150, 420} is a
  // chunk of three query tiles (64, 64, 22 tokens) over several key blocks.
  ExpectEqualsContiguousReference(GetParam(), {{1, 1}, {5, 5}, {1, ps}, {1, ps + 1}, {3, 2 * ps + 1},
                                               {ps, 3 * ps}, {7, 40}, {40, 300}, {150, 420}});
}

TEST_P(PagedAttentionTest, SingleDecodeTokenEqualsContiguousReference) {
  // Batch-1 decode has too few (token, KV head) pairs to share; long ones split their keys
  // into ranges that are merged afterwards.
  ExpectEqualsContiguousReference(GetParam(), {{1, 2 * GetParam().page_size + 3}});
  ExpectEqualsContiguousReference(GetParam(), {{1, 1500}});
  ExpectEqualsContiguousReference(GetParam(), {{2, 700}});
}

TEST_P(PagedAttentionTest, ConsecutivePagesEqualContiguousReference) {
  const int64_t ps = GetParam().page_size;
  ExpectEqualsContiguousReference(GetParam(), {{1, 1500}, {3, 2 * ps + 1}, {40, 300}, {1, 7}}, /*in_order=*/true);
}

INSTANTIATE_TEST_SUITE_P(Shapes, PagedAttentionTest,
                         ::testing::Values(Params{1, 2, 2, 8}, Params{3, 6, 2, 16},
                                           Params{16, 9, 3, 64}, Params{16, 8, 1, 32},
                                           Params{5, 4, 4, 128}, Params{16, 9, 3, 64, DType::kF16},
                                           Params{3, 6, 2, 12, DType::kF16}));

}  // namespace
}  // namespace kvserve::cpu
