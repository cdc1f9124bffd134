// Per-row top-k of logits, CPU reference: the oracle for the CUDA kernel of the same shape
// (kernels/cuda/sampling_topk.cu) and the candidate list Sampler::SampleFromTopK consumes.
#pragma once
#include <cstdint>

namespace kvserve::cpu {

// row_topk.cc. For each row r of logits [rows, vocab]: the k largest values and their ids,
// ids [rows, k] and vals [rows, k], in one total order: higher value first, equal values by
// lower id first. NaN counts as -inf (and is reported as -inf); -0.0 equals +0.0.
// 1 <= k <= vocab.
void RowTopK(const float* logits, int64_t rows, int64_t vocab, int64_t k, int32_t* ids, float* vals);

}  // namespace kvserve::cpu
