// Per-row top-k, CPU reference: partial_sort of each row's ids under the documented total
// order. Plain on purpose; it is what the CUDA kernel is checked against.
#include "kernels/cpu/row_topk.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace kvserve::cpu {

void RowTopK(const float* logits, int64_t rows, int64_t vocab, int64_t k, int32_t* ids, float* vals) {
  std::vector<float> row(static_cast<size_t>(vocab));
  std::vector<int32_t> order(static_cast<size_t>(vocab));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < vocab; ++i) {
      const float v = logits[r * vocab + i];
      row[i] = std::isnan(v) ? -std::numeric_limits<float>::infinity() : v;
    }
    std::iota(order.begin(), order.end(), 0);
    // operator== makes -0.0 and +0.0 tie, so the lower id wins between them.
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
    for (int64_t j = 0; j < k; ++j) {
      ids[r * k + j] = order[j];
      vals[r * k + j] = row[order[j]];
    }
  }
}

}  // namespace kvserve::cpu
