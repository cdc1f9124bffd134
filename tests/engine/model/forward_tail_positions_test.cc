// ForwardRequest::tail_tokens / tail_start_pos: a step's last tokens run at positions of their
// own (chunk mode's question probe, placed where the question will be). What must hold: the
// other tokens are untouched, the tail's queries are those of the same tokens at the given
// positions (at layer 0, where a query depends on its token only, exactly the adjacent query
// rotated by the shift), and the tail still sees every cached entry (causal by order).
#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "engine/kv/kv_memory.h"
#include "engine/kv/page_pool.h"
#include "engine/kv/query_window.h"
#include "engine/model/forward.h"
#include "gtest/gtest.h"
#include "tests/engine/tiny_model.h"

namespace kvserve {
namespace {

struct StepOut {
  std::vector<float> logits;
  std::vector<std::vector<float>> queries;  // per layer [n_tokens, n_heads * head_dim]
};

// One step of `tokens` on an empty cache, the last `tail` of them at tail_start_pos.
StepOut RunStep(const Model& model, Backend& backend, const std::vector<int32_t>& tokens, int64_t tail,
                int64_t tail_start_pos) {
  const ModelConfig& c = model.config;
  const int64_t n = static_cast<int64_t>(tokens.size());
  PagePool pool(PagePoolShape{PeakPagesForRequest(n, 1, 16, c.n_layers), 16, c.n_kv_heads, c.head_dim}, &backend);
  SequenceKv seq(c.n_layers);
  QueryWindow window(c.n_layers, n, c.n_heads, c.head_dim);
  LlamaForward fwd(model, backend, pool);
  StepOut out;
  ForwardRequest req{tokens, 0, &seq, /*all_logits=*/true, &window, tail, tail_start_pos};
  const absl::Status st = fwd.Step({&req, 1}, &out.logits);
  EXPECT_TRUE(st.ok()) << st;
  out.queries.resize(static_cast<size_t>(c.n_layers));
  for (int64_t l = 0; l < c.n_layers; ++l) window.CopyOrdered(l, &out.queries[static_cast<size_t>(l)]);
  seq.Release(pool);
  return out;
}

TEST(ForwardTailPositionsTest, TailRunsAtItsOwnPositionsAndTheRestIsUntouched) {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<Backend> backend;
  testing::MakeTinyModel(3, &model, &tokenizer, &backend);
  const ModelConfig& c = model->config;
  const std::vector<int32_t> tokens = {5, 17, 42, 9, 23, 31};
  const int64_t n = 6, tail = 2, head = n - tail, shift = 40;
  const StepOut adjacent = RunStep(*model, *backend, tokens, tail, head);  // the plain positions
  const StepOut plain = RunStep(*model, *backend, tokens, 0, 0);
  const StepOut moved = RunStep(*model, *backend, tokens, tail, head + shift);
  ASSERT_EQ(adjacent.logits, plain.logits);  // tail_start_pos right after the head: a plain step

  const int64_t vocab = c.vocab_size, row = c.n_heads * c.head_dim;
  // The head's tokens come before the tail: their logits do not change.
  for (int64_t i = 0; i < head * vocab; ++i) ASSERT_EQ(moved.logits[i], plain.logits[i]) << i;
  // The tail's do: it sees the same entries at other distances.
  float diff = 0;
  for (int64_t i = head * vocab; i < n * vocab; ++i) diff = std::max(diff, std::fabs(moved.logits[i] - plain.logits[i]));
  EXPECT_GT(diff, 1e-4f);

  // Layer 0: the tail's queries are the plain ones rotated by `shift` more.
  std::vector<float> rotated(plain.queries[0].begin() + head * row, plain.queries[0].end());
  const std::vector<int32_t> by(tail, static_cast<int32_t>(shift));
  const std::vector<float> inv_freq = RopeInverseFrequencies(c, model->weights.rope_freq_factors);
  backend->Rope(rotated.data(), by.data(), tail, c.n_heads, c.head_dim, inv_freq.data(), c.rope_dim, c.rope_neox);
  for (int64_t i = 0; i < tail * row; ++i) {
    EXPECT_NEAR(moved.queries[0][head * row + i], rotated[i], 1e-4f) << i;
  }
  // The head's queries are the plain ones.
  for (int64_t i = 0; i < head * row; ++i) ASSERT_EQ(moved.queries[0][i], plain.queries[0][i]) << i;
}

}  // namespace
}  // namespace kvserve
