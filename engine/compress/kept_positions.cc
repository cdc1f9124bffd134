#include "engine/compress/kept_positions.h"

#include <algorithm>

namespace kvserve {

void KeptPositions::OnSelection(int64_t l, int64_t heads, int64_t len, absl::Span<const int32_t> slots,
                                int64_t n_keep) {
  Layer& L = layers_[static_cast<size_t>(l)];
  const int64_t old_kept = L.kept;
  const int64_t first_new = L.appended;
  std::vector<int32_t> next(static_cast<size_t>(heads * n_keep));
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < n_keep; ++i) {
      const int64_t s = slots[static_cast<size_t>(h * n_keep + i)];
      next[static_cast<size_t>(h * n_keep + i)] =
          static_cast<int32_t>(s < old_kept ? L.positions[static_cast<size_t>(h * old_kept + s)]
                                            : first_new + (s - old_kept));
    }
  }
  L.positions = std::move(next);
  L.kept = n_keep;
  L.appended = first_new + (len - old_kept);
}

bool KeptPositions::Holds(int64_t l, int64_t h, int64_t position) const {
  const Layer& L = layers_[static_cast<size_t>(l)];
  // Before the first selection appended is 0, so every position counts as arriving after it.
  if (position >= L.appended) return true;  // arrived after the last selection
  const auto begin = L.positions.begin() + h * L.kept, end = begin + L.kept;
  return std::binary_search(begin, end, static_cast<int32_t>(position));
}

double KeptPositions::ShareHoldingSpans(int64_t heads, absl::Span<const std::pair<int64_t, int64_t>> spans) const {
  int64_t holding = 0;
  for (size_t l = 0; l < layers_.size(); ++l) {
    for (int64_t h = 0; h < heads; ++h) {
      bool all = true;
      for (const auto& [begin, end] : spans) {
        for (int64_t p = begin; p < end && all; ++p) all = Holds(static_cast<int64_t>(l), h, p);
      }
      holding += all ? 1 : 0;
    }
  }
  const int64_t pairs = static_cast<int64_t>(layers_.size()) * heads;
  return pairs > 0 ? static_cast<double>(holding) / static_cast<double>(pairs) : 1.0;
}

}  // namespace kvserve
