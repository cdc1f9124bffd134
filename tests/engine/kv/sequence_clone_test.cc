// CloneSequence: the copy holds the same slots in other pages, the original survives changes
// to the copy, and a pool too small for the copy takes nothing.
#include "engine/kv/sequence_clone.h"

#include "engine/model/forward.h"
#include "engine/model/model_loader.h"
#include "gtest/gtest.h"

namespace kvserve {
namespace {

PagePoolShape Shape(int64_t pages) { return {pages, 4, 2, 8}; }

// Fills every slot of seq with values derived from (page, offset) so copies are checkable.
void Fill(PagePool& pool, SequenceKv& seq, const std::vector<int64_t>& lens) {
  PagedKv kv = pool.view();
  for (size_t l = 0; l < lens.size(); ++l) {
    ASSERT_TRUE(seq.GrowLayer(pool, static_cast<int64_t>(l), lens[l]).ok());
    seq.layer_len[l] = lens[l];
    for (int32_t p : seq.layer_pages[l]) {
      const int64_t n = kv.page_size * kv.n_kv_heads;
      for (int64_t i = 0; i < n * kv.head_dim; ++i) {
        static_cast<float*>(kv.k)[p * n * kv.head_dim + i] = static_cast<float>(p * 1000 + i);
        static_cast<float*>(kv.v)[p * n * kv.head_dim + i] = static_cast<float>(-p * 1000 - i);
      }
      for (int64_t i = 0; i < n; ++i) kv.log_w[p * n + i] = static_cast<float>(p) * 0.5f - static_cast<float>(i);
    }
  }
}

// Slot s, head h of a layer: its index into log_w, and times head_dim into K and V.
int64_t Entry(const PagedKv& kv, const std::vector<int32_t>& pages, int64_t s, int64_t h) {
  return (static_cast<int64_t>(pages[s / kv.page_size]) * kv.page_size + s % kv.page_size) * kv.n_kv_heads + h;
}

void ExpectSameSlots(PagePool& pool, const SequenceKv& a, const SequenceKv& b) {
  ASSERT_EQ(a.layer_len, b.layer_len);
  const PagedKv kv = pool.view();
  for (size_t l = 0; l < a.layer_len.size(); ++l) {
    for (int64_t s = 0; s < a.layer_len[l]; ++s) {
      for (int64_t h = 0; h < kv.n_kv_heads; ++h) {
        const int64_t ea = Entry(kv, a.layer_pages[l], s, h), eb = Entry(kv, b.layer_pages[l], s, h);
        EXPECT_EQ(kv.log_w[ea], kv.log_w[eb]);
        for (int64_t d = 0; d < kv.head_dim; ++d) {
          const auto* k = static_cast<const float*>(kv.k);
          const auto* v = static_cast<const float*>(kv.v);
          EXPECT_EQ(k[ea * kv.head_dim + d], k[eb * kv.head_dim + d]);
          EXPECT_EQ(v[ea * kv.head_dim + d], v[eb * kv.head_dim + d]);
        }
      }
    }
  }
}

TEST(SequenceCloneTest, CopyHoldsTheSameSlotsInItsOwnPages) {
  PagePool pool(Shape(40));
  SequenceKv seq(3);
  Fill(pool, seq, {9, 4, 0});
  auto clone = CloneSequence(pool, seq);
  ASSERT_TRUE(clone.ok()) << clone.status();
  EXPECT_EQ(clone->pages_held(), seq.pages_held());
  EXPECT_EQ(clone->reserved_pages, 0);
  ExpectSameSlots(pool, seq, *clone);
  std::vector<const std::vector<int32_t>*> owners;
  for (const auto* s : {&seq, &*clone}) {
    for (const auto& pages : s->layer_pages) owners.push_back(&pages);
  }
  EXPECT_TRUE(pool.CheckInvariants(owners).ok());  // no page shared between the two

  // Changing and shrinking the copy leaves the original as it was.
  SequenceKv before = *CloneSequence(pool, seq);
  static_cast<float*>(pool.view().k)[clone->layer_pages[0][0] * 4 * 2 * 8] = 12345.0f;
  clone->TruncateLayer(pool, 0, 1);
  ExpectSameSlots(pool, seq, before);
  clone->Release(pool);
  before.Release(pool);
  seq.Release(pool);
  EXPECT_EQ(pool.stats().pages_used, 0);
}

TEST(SequenceCloneTest, PoolTooSmallForTheCopyTakesNothing) {
  PagePool pool(Shape(5));
  SequenceKv seq(2);
  Fill(pool, seq, {8, 4});  // 3 pages; a copy needs 3 more, 2 are free
  auto clone = CloneSequence(pool, seq);
  EXPECT_EQ(clone.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(clone.status().message().find("needs 3 KV pages"), std::string::npos) << clone.status();
  EXPECT_EQ(pool.stats().pages_used, 3);
  seq.Release(pool);
}

TEST(SequenceCloneTest, ContinuingFromACopyGivesTheSameLogitsAsFromTheOriginal) {
  auto model = MakeRandomModel("tiny", 3);
  ASSERT_TRUE(model.ok());
  const ModelConfig& c = model->config;
  auto backend = MakeCpuBackend();
  PagePool pool({64, 8, c.n_kv_heads, c.head_dim});
  LlamaForward fwd(*model, *backend, pool);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 37; ++i) prompt.push_back((i * 13 + 5) % 300);
  const std::vector<int32_t> next = {7, 99, 250};
  SequenceKv seq(c.n_layers);
  std::vector<float> logits;
  ForwardRequest pre{prompt, 0, &seq, false};
  ASSERT_TRUE(fwd.Step({&pre, 1}, &logits).ok());
  auto clone = CloneSequence(pool, seq);
  ASSERT_TRUE(clone.ok());
  std::vector<float> from_clone, from_original;
  ForwardRequest a{next, 37, &*clone, true};
  ASSERT_TRUE(fwd.Step({&a, 1}, &from_clone).ok());
  ForwardRequest b{next, 37, &seq, true};
  ASSERT_TRUE(fwd.Step({&b, 1}, &from_original).ok());
  EXPECT_EQ(from_clone, from_original);
  clone->Release(pool);
  seq.Release(pool);
}

}  // namespace
}  // namespace kvserve
