// SnapKV and CriticalKV (and pyramid, which selects like SnapKV) for a KV pool in device
// memory: scoring, per-head top-k and compaction run as the Backend's compression ops, so no
// page leaves the device and nothing inside a layer's compression waits for it. The number
// of pages kept is known on the host beforehand (n_keep), so it needs no read-back either.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "engine/compress/compression_settings.h"
#include "engine/compress/kv_policy.h"
#include "engine/kv/page_pool.h"
#include "kernels/backend.h"

namespace kvserve {

struct DeviceSelectionSpec {
  bool critical = false;          // CriticalKV's two stages over the SnapKV score
  int64_t pool_kernel = 5;        // SnapKV average pool
  double first_stage_ratio = 0.5; // CriticalKV
  float eps = 1e-4f;              // CriticalKV, as CriticalKvPolicy's default
};

// The device form of the settings' policy; nullopt when it has none (streaming, merge-reduce,
// and any policy under an auto:RISK budget).
std::optional<DeviceSelectionSpec> DeviceSelectionFor(const CompressionSettings& s);

// OK when settings s can run with the KV pool in the memory of backend `device` (named in the
// message): the full cache, or a policy with a device form. Otherwise INVALID_ARGUMENT naming
// the policy (or the auto:RISK budget) and the device, so a server refuses such a request up
// front instead of failing it in the middle of its prefill.
absl::Status CheckDeviceForm(const CompressionSettings& s, std::string_view device);

class DeviceLayerCompressor {
 public:
  // Buffers come from `backend`, which must be the backend of every later Compress call.
  DeviceLayerCompressor(Backend& backend, const DeviceSelectionSpec& spec, int64_t n_layers);
  ~DeviceLayerCompressor();
  DeviceLayerCompressor(const DeviceLayerCompressor&) = delete;
  DeviceLayerCompressor& operator=(const DeviceLayerCompressor&) = delete;

  // Keeps r.n_keep entries per KV head of layer l (r.layer's pages are backend memory,
  // r.window host memory), compacts them to the leading slots and frees the pages past them
  // (a question probe's slots, r.probe_slots, among them).
  absl::Status Compress(const SelectionRequest& r, PagePool& pool, SequenceKv& seq, int64_t l);

 private:
  // A grow-only backend buffer.
  struct Buffer {
    void* p = nullptr;
    int64_t bytes = 0;
  };
  void* Reserve(Buffer& b, int64_t bytes);
  // CriticalKV: per layer, the value norms [n_kv_heads, stride] of the first `known` slots,
  // kept in step with compaction so each entry is projected once.
  struct NormCache {
    Buffer buf;
    int64_t stride = 0;
    int64_t known = 0;
  };
  float* NormsFor(NormCache& c, int64_t heads, int64_t len);

  Backend& backend_;
  DeviceSelectionSpec spec_;
  Buffer window_, scores_, merged_, slots_, spare_, identity_, candidates_;
  std::vector<NormCache> norms_;
};

}  // namespace kvserve
