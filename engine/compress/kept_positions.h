// Which prompt positions each KV head of each layer still holds after a sequence's
// compressions: a diagnostic (kvserve eval reports whether a needle's tokens survived). Slots
// are appended in position order between selections and a selection keeps, per head, an
// ascending subset of the slots, so following each selection's kept slots is enough.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/types/span.h"

namespace kvserve {

class KeptPositions {
 public:
  explicit KeptPositions(int64_t n_layers) : layers_(static_cast<size_t>(n_layers)) {}

  // Layer l held `len` candidate slots, of which the first were the ones its last selection
  // kept (in order) and the rest arrived since, at the next positions; each of `heads` KV
  // heads kept slots[h * n_keep + i], i < n_keep.
  void OnSelection(int64_t l, int64_t heads, int64_t len, absl::Span<const int32_t> slots, int64_t n_keep);

  // True until layer l's first selection, and then while KV head h keeps `position`.
  bool Holds(int64_t l, int64_t h, int64_t position) const;
  // Of every (layer, KV head) pair, the share that holds every position of every span
  // [begin, end).
  double ShareHoldingSpans(int64_t heads, absl::Span<const std::pair<int64_t, int64_t>> spans) const;

 private:
  struct Layer {
    std::vector<int32_t> positions;  // [heads, kept]: the positions of the kept slots, ascending
    int64_t kept = 0;      // 0 until the layer's first selection (a selection keeps at least one)
    int64_t appended = 0;  // positions seen so far (the next new slot's position)
  };
  std::vector<Layer> layers_;
};

}  // namespace kvserve
