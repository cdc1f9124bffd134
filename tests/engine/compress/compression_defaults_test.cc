// The compression a user gets without setting the window or the pool: on SmolLM2 it reads back
// a seven-digit passkey at a 10% budget, in both modes, where kvpress's defaults (a 64-query
// window, a pool of 5) keep only the needle's first digits.
#include "engine/compress/compression_settings.h"
#include "engine/model/model_loader.h"
#include "engine/offline/cache_evaluator.h"
#include "engine/offline/retrieval_tasks.h"
#include "engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "kernels/backend.h"
#include "tests/test_paths.h"

namespace kvserve {
namespace {

TEST(CompressionDefaultsSmolLm2, KeepEveryDigitOfAPasskeyThatKvpressDefaultsCut) {
  auto model = LoadGgufModel(testing::SmolLm2Path());
  ASSERT_TRUE(model.ok()) << model.status();
  auto tok = Tokenizer::Create(model->tokenizer);
  ASSERT_TRUE(tok.ok());
  auto backend = MakeCpuBackend();
  const CompressionSettings defaults;
  CacheEvaluatorOptions o;
  o.max_context = 1024;
  o.window = defaults.window;  // the queries the prefill records are the window's
  o.prefill_chunk = 256;
  CacheEvaluator eval(*model, *tok, *backend, o);
  RetrievalSpec spec{1024, /*sample=*/1, /*n_samples=*/3, /*seed=*/0, PromptStyle::kPlain};
  auto sample = BuildPasskeySample(*tok, model->tokenizer, spec);
  ASSERT_TRUE(sample.ok()) << sample.status();
  ASSERT_TRUE(eval.Prefill(*sample).ok());

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
