// Which KV settings can run with the KV pool in a device's memory: every scoring policy that
// reads no page on the host. The check runs once per request, up front.
#pragma once
#include <string_view>

#include "absl/status/status.h"
#include "engine/compress/compression_settings.h"

namespace kvserve {

// True for the full cache and for the scoring policies that read no page on the host
// (snapkv, pyramid, criticalkv, streaming) under a fixed budget; false for keydiff and
// mergereduce:* (they read K/V on the host) and for any policy under auto:RISK (the
// compressibility estimate reads host pages).
bool HasDeviceForm(const CompressionSettings& s);

// The former name, kept while server/cli/bench_command.cc still calls it (issue 20, part 2).
inline bool DeviceSelectionFor(const CompressionSettings& s) { return HasDeviceForm(s); }

// OK when settings s can run with the KV pool in the memory of backend `device` (named in the
// message). Otherwise INVALID_ARGUMENT naming the policy (or the auto:RISK budget) and the
// device, so a server refuses such a request up front instead of failing it in the middle of
// its prefill.
absl::Status CheckDeviceForm(const CompressionSettings& s, std::string_view device);

}  // namespace kvserve
