// A layer of hand-made K/V in a small page pool (pages deliberately out of order), for
// policy and compaction tests.
#pragma once
#include <cmath>
#include <random>
#include <vector>

#include "engine/compress/kv_policy.h"
#include "engine/kv/page_pool.h"
#include "gtest/gtest.h"

namespace kvserve {

struct LayerFixture {
  LayerFixture(int64_t len, int64_t kv_heads, int64_t head_dim, int64_t page_size = 4,
               DType kv_dtype = DType::kF32)
      : pool({(len + page_size - 1) / page_size + 3, page_size, kv_heads, head_dim, kv_dtype}), seq(1),
        k(static_cast<size_t>(len * kv_heads * head_dim)), v(k.size()), log_w(static_cast<size_t>(len * kv_heads)) {
    // Take two spare pages first so the layer's pages are not 0, 1, 2, ...
    std::vector<int32_t> spare;
    EXPECT_TRUE(pool.Allocate(2, &spare).ok());
    EXPECT_TRUE(seq.GrowLayer(pool, 0, len).ok());
    pool.Free(spare);
    seq.layer_len[0] = len;
  }

  void FillRandom(uint32_t seed, float value_scale = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> n(0.0f, 1.0f);
    for (float& x : k) x = n(rng);
    for (float& x : v) x = n(rng) * value_scale;
    Store();
  }

  // Copies k, v, log_w [len, kv_heads, (head_dim)] into the pages.
  void Store() {
    LayerKv L = layer();
    const int64_t H = L.kv.n_kv_heads, d = L.kv.head_dim;
    for (int64_t s = 0; s < L.len; ++s) {
      for (int64_t h = 0; h < H; ++h) {
        const int64_t off = L.Offset(s, h);
        WriteKvRow(L.kv, L.kv.k, off, &k[(s * H + h) * d]);
        WriteKvRow(L.kv, L.kv.v, off, &v[(s * H + h) * d]);
        L.kv.log_w[off] = log_w[s * H + h];
      }
    }
  }

  LayerKv layer() { return LayerKv{pool.view(), seq.layer_pages[0], seq.layer_len[0]}; }

  // A selection of n_keep entries of this layer scored by window ([window_len, n_heads,
  // head_dim] queries) with the layer's o_proj wo [hidden, n_heads * head_dim] (both kept by
  // the caller).
  SelectionRequest Request(const std::vector<float>& window, int64_t window_len, int64_t n_heads,
                           const std::vector<float>& wo, int64_t n_keep) {
    SelectionRequest r;
    r.layer = layer();
    r.window = window;
    r.window_len = window_len;
    r.n_heads = n_heads;
    const int64_t d = r.layer.kv.head_dim;
    r.scale = 1.0f / std::sqrt(static_cast<float>(d));
    r.wo = WeightView{DType::kF32, static_cast<int64_t>(wo.size()) / (n_heads * d), n_heads * d, wo.data()};
    r.n_keep = n_keep;
    return r;
  }

  PagePool pool;
  SequenceKv seq;
  std::vector<float> k, v, log_w;  // [len, kv_heads, head_dim] / [len, kv_heads]
};

}  // namespace kvserve
