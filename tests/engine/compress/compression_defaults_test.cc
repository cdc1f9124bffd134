// The compression a user gets without setting the window or the pool: on SmolLM2 it reads back
// a seven-digit passkey at a 10% budget, in both modes, where kvpress's defaults (a 64-query
// window, a pool of 5) keep only the needle's first digits.
#include "engine/compress/compression_settings.h"
#include "gtest/gtest.h"
#include "tests/engine/compress/smollm2_passkey_fixture.h"

namespace kvserve {
namespace {

using CompressionDefaultsSmolLm2 = testing::SmolLm2PasskeyAt1K;

TEST_F(CompressionDefaultsSmolLm2, KeepEveryDigitOfAPasskeyThatKvpressDefaultsCut) {
  CacheEvaluator& eval = *eval_;
  const EvalSample* sample = &*sample_;
  CompressionSettings kv;  // only the policy and the budget set
  kv.policy = "snapkv";
  kv.budget = 0.1;
  auto at_end = eval.Score(kv);
  ASSERT_TRUE(at_end.ok()) << at_end.status();
  EXPECT_EQ(at_end->value, 1.0) << "prefill_end said '" << eval.last_answer() << "', key " << sample->answers.at(0);
  kv.at = CompressAt::kChunk;
  kv.chunk_headroom = 0;  // compress after every 256-token chunk
  auto chunk = eval.Score(kv);
  ASSERT_TRUE(chunk.ok()) << chunk.status();
  EXPECT_EQ(chunk->value, 1.0) << "chunk mode said '" << eval.last_answer() << "', key " << sample->answers.at(0);

  // kvpress's pool of 5 around what the same question attends to: the key comes back cut.
  kv.at = CompressAt::kPrefillEnd;
  kv.pool_kernel = 5;
  auto narrow = eval.Score(kv);
  ASSERT_TRUE(narrow.ok()) << narrow.status();
  EXPECT_EQ(narrow->value, 0.0) << "a pool of 5 said '" << eval.last_answer() << "'";
  EXPECT_GT(narrow->answer_nll_gap, at_end->answer_nll_gap + 1.0);
}

}  // namespace
}  // namespace kvserve
