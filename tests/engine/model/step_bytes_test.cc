// The bytes a decode step reads (kvserve bench's decode_bytes_per_step, the roofline's divisor).
#include "engine/model/step_bytes.h"

#include <gtest/gtest.h>

#include "engine/model/model_loader.h"

namespace kvserve {
namespace {

TEST(StepBytesTest, TinyModelWeightsCountedByHand) {
  auto m = MakeRandomModel("tiny", 1);
  ASSERT_TRUE(m.ok()) << m.status();
  // tiny: 2 layers, hidden 64, 4 heads and 2 KV heads of 16, ffn 128, vocab 512, all f32, no
  // biases. Per layer: 2 norms of 64, wq and wo 64x64, wk and wv 32x64, gate and up 128x64,
  // down 64x128 = 36,992 floats; then the output norm (64) and head (512x64). The embedding
  // table is not read whole, so it is not counted even when tied to the head.
  EXPECT_EQ(WeightBytesPerStep(m->weights), (2 * 36992 + 64 + 512 * 64) * 4);
}

TEST(StepBytesTest, QuantizedRowsCountTheirBlocks) {
  ModelWeights w;
  w.layers.resize(1);
  // Q4_1: 32 weights in 20 bytes, so a row of 64 is 40 bytes.
  w.layers[0].wq = {DType::kQ4_1, 3, 64, &w};
  EXPECT_EQ(WeightBytesPerStep(w), 120);
}

TEST(StepBytesTest, DecodeTokenReadsEveryLayersEntriesAndItsOwn) {
  SequenceKv seq(2);
  seq.layer_len = {10, 4};  // layers may hold different counts after compression
  // f16: per slot and layer, 2 KV heads x (K and V rows of 16 halves + a float log weight).
  const PagePoolShape shape{0, 16, 2, 16, DType::kF16};
  EXPECT_EQ(KvBytesPerDecodeToken(seq, shape), (11 + 5) * 2 * (2 * 32 + 4));
}

}  // namespace
}  // namespace kvserve
