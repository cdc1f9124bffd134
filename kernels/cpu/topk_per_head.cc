// Per-head top-k on the CPU: each head's k best under the documented total order (score
// descending, then slot ascending; a total order, so nth_element picks exactly the set a
// full sort would), then the kept slots in ascending order.
#include <algorithm>
#include <numeric>
#include <vector>

#include "kernels/cpu/kv_compress_ops.h"

namespace kvserve::cpu {

void TopKPerHead(const float* scores, int64_t heads, int64_t len, int64_t k, int32_t* slots) {
  std::vector<int32_t> order(static_cast<size_t>(len));
  for (int64_t h = 0; h < heads; ++h) {
    const float* sc = scores + h * len;
    std::iota(order.begin(), order.end(), 0);
    // -0.0 == +0.0 under operator==, so signed zeros tie and the lower slot wins.
    std::nth_element(order.begin(), order.begin() + k, order.end(),
                     [&](int32_t a, int32_t b) { return sc[a] > sc[b] || (sc[a] == sc[b] && a < b); });
    std::sort(order.begin(), order.begin() + k);
    std::copy_n(order.begin(), k, slots + h * k);
  }
}

}  // namespace kvserve::cpu
