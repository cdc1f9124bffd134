#include "engine/model/step_bytes.h"

#include "kernels/dtype.h"

namespace kvserve {
namespace {

int64_t Bytes(const WeightView& w) { return w.data == nullptr ? 0 : RowBytes(w.dtype, w.cols) * w.rows; }

}  // namespace

int64_t WeightBytesPerStep(const ModelWeights& weights) {
  int64_t total = Bytes(weights.output_norm) + Bytes(weights.output);
  for (const LayerWeights& l : weights.layers) {
    for (const WeightView* w : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.bq, &l.bk, &l.bv, &l.ffn_norm,
                                &l.w_gate, &l.w_up, &l.w_down}) {
      total += Bytes(*w);
    }
  }
  return total;
}

int64_t KvBytesPerDecodeToken(const SequenceKv& seq, const PagePoolShape& shape) {
  int64_t slots = 0;
  for (const int64_t len : seq.layer_len) slots += len + 1;
  return slots * (PagePool::PageBytes(shape) / shape.page_size);
}

}  // namespace kvserve
