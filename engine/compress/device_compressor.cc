#include "engine/compress/device_compressor.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace kvserve {

std::optional<DeviceSelectionSpec> DeviceSelectionFor(const CompressionSettings& s) {
  if (s.policy != "snapkv" && s.policy != "pyramid" && s.policy != "criticalkv") return std::nullopt;
  // auto:RISK picks the budget from the compressibility estimate, which reads host pages.
  if (s.auto_risk > 0) return std::nullopt;
  DeviceSelectionSpec spec;
  spec.critical = s.policy == "criticalkv";
  spec.pool_kernel = s.pool_kernel;
  spec.first_stage_ratio = s.first_stage_ratio;
  return spec;
}

absl::Status CheckDeviceForm(const CompressionSettings& s, std::string_view device) {
  if (!s.active() || DeviceSelectionFor(s)) return absl::OkStatus();
  CompressionSettings fixed = s;
  fixed.auto_risk = 0;
  const std::string what = s.auto_risk > 0 && DeviceSelectionFor(fixed)
                               ? absl::StrCat("KV budget auto:", s.auto_risk, " (policy ", s.policy, ")")
                               : absl::StrCat("KV policy ", s.policy);
  return absl::InvalidArgumentError(absl::StrCat(
      what, " has no device form: the ", std::string(device),
      " backend keeps the KV cache in device memory, where only full, snapkv, pyramid and criticalkv with a fixed "
      "budget run (streaming, mergereduce:* and auto:RISK read pages on the host; they need --device cpu)"));
}

DeviceLayerCompressor::DeviceLayerCompressor(Backend& backend, const DeviceSelectionSpec& spec, int64_t n_layers)
    : backend_(backend), spec_(spec), norms_(spec.critical ? static_cast<size_t>(n_layers) : 0) {}

DeviceLayerCompressor::~DeviceLayerCompressor() {
  for (Buffer* b : {&window_, &scores_, &merged_, &slots_, &spare_}) backend_.Deallocate(b->p);
  for (NormCache& c : norms_) backend_.Deallocate(c.buf.p);
}

void* DeviceLayerCompressor::Reserve(Buffer& b, int64_t bytes) {
  if (bytes > b.bytes) {
    // Deallocate waits for kernels still using the old buffer (cudaFree synchronizes); this
    // happens only while the buffers grow to a sequence's largest layer.
    backend_.Deallocate(b.p);
    b.bytes = std::max(bytes, b.bytes * 2);
    b.p = backend_.Allocate(b.bytes);
  }
  return b.p;
}

float* DeviceLayerCompressor::NormsFor(NormCache& c, int64_t heads, int64_t len) {
  if (len > c.stride) {
    const int64_t stride = std::max(len, 2 * c.stride);
    Buffer grown;
    grown.bytes = static_cast<int64_t>(sizeof(float)) * heads * stride;
    grown.p = backend_.Allocate(grown.bytes);
    for (int64_t h = 0; h < heads && c.known > 0; ++h) {
      backend_.Copy(static_cast<float*>(grown.p) + h * stride, static_cast<float*>(c.buf.p) + h * c.stride,
                    static_cast<int64_t>(sizeof(float)) * c.known);
    }
    backend_.Deallocate(c.buf.p);
    c.buf = grown;
    c.stride = stride;
  }
  return static_cast<float*>(c.buf.p);
}

absl::Status DeviceLayerCompressor::Compress(const SelectionRequest& r, PagePool& pool, SequenceKv& seq, int64_t l) {
  const LayerKv& L = r.layer;
  const int64_t heads = L.kv.n_kv_heads, d = L.kv.head_dim, n_keep = r.n_keep;
  // The window scores every slot (a question probe's too); only the first `len` may be kept.
  const int64_t scored = L.len, len = L.len - r.probe_slots;
  if (n_keep < 1 || n_keep > len || r.window_len < 1 || r.probe_slots < 0) {
    return absl::InvalidArgumentError(absl::StrCat("device selection of ", n_keep, " of ", len, " slots (",
                                                   r.probe_slots, " probe slots) with ", r.window_len,
                                                   " window queries"));
  }
  constexpr int64_t kF = sizeof(float);
  // As SnapKvScorer: the last min(window, len) queries.
  const int64_t w = std::min(r.window_len, scored), row = r.n_heads * d;
  auto* window = static_cast<float*>(Reserve(window_, kF * w * row));
  backend_.CopyIn(window, r.window.data() + (r.window_len - w) * row, kF * w * row);
  auto* scores = static_cast<float*>(Reserve(scores_, kF * heads * scored));
  backend_.SnapKvScores(L.kv, L.pages.data(), scored, window, w, AttentionShape{r.n_heads, r.scale},
                        spec_.pool_kernel, scores);
  if (r.probe_slots > 0) {
    // The candidates' columns [heads, len] out of [heads, scored], by an identity gather.
    std::vector<int32_t> identity(static_cast<size_t>(heads * len));
    for (int64_t i = 0; i < heads * len; ++i) identity[i] = static_cast<int32_t>(i % len);
    const int64_t ibytes = static_cast<int64_t>(sizeof(int32_t)) * heads * len;
    auto* ids = static_cast<int32_t*>(Reserve(identity_, ibytes));
    backend_.CopyIn(ids, identity.data(), ibytes);
    auto* kept = static_cast<float*>(Reserve(candidates_, kF * heads * len));
    backend_.GatherPerHead(scores, scored, ids, heads, len, kept, len);
    scores = kept;
  }
  const float* final_scores = scores;
  NormCache* cache = spec_.critical ? &norms_[static_cast<size_t>(l)] : nullptr;
  if (cache) {
    float* norms = NormsFor(*cache, heads, len);
    // Only the entries that arrived since the last selection are projected.
    backend_.ProjectedValueNorms(L.kv, L.pages.data(), cache->known, len, r.wo, r.n_heads, norms, cache->stride);
    auto* merged = static_cast<float*>(Reserve(merged_, kF * heads * len));
    const int64_t n_first =
        static_cast<int64_t>(std::floor(static_cast<double>(n_keep) * spec_.first_stage_ratio));
    backend_.CriticalKvScores(scores, norms, cache->stride, heads, len, n_first, spec_.eps, merged);
    final_scores = merged;
  }
  auto* slots = static_cast<int32_t*>(Reserve(slots_, static_cast<int64_t>(sizeof(int32_t)) * heads * n_keep));
  backend_.TopKPerHead(final_scores, heads, len, n_keep, slots);
  backend_.CompactKv(L.kv, L.pages.data(), len, slots, /*new_log_w=*/nullptr, n_keep);
  if (cache) {
    auto* moved = static_cast<float*>(Reserve(spare_, cache->buf.bytes));
    backend_.GatherPerHead(static_cast<float*>(cache->buf.p), cache->stride, slots, heads, n_keep, moved,
                           cache->stride);
    std::swap(cache->buf, spare_);
    cache->known = n_keep;
  }
  // The freed pages go back to the pool at once: every later use of them is a device op on
  // the same stream, so it runs after the compaction that reads them.
  seq.TruncateLayer(pool, l, n_keep);
  return absl::OkStatus();
}

}  // namespace kvserve
