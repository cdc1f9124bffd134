#include "engine/compress/device_form.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace kvserve {
namespace {

// The policy alone, whatever the budget.
bool PolicyRunsOnDevice(const CompressionSettings& s) {
  if (!s.active()) return true;
  absl::StatusOr<std::unique_ptr<KvPolicy>> policy = MakeKvPolicy(s);
  return policy.ok() && !(*policy)->ReadsHostPages();
}

}  // namespace

bool HasDeviceForm(const CompressionSettings& s) {
  if (!s.active()) return true;
  // auto:RISK picks the budget from the compressibility estimate, which reads host pages.
  return s.auto_risk <= 0 && PolicyRunsOnDevice(s);
}

absl::Status CheckDeviceForm(const CompressionSettings& s, std::string_view device) {
  if (HasDeviceForm(s)) return absl::OkStatus();
  const std::string what = s.auto_risk > 0 && PolicyRunsOnDevice(s)
                               ? absl::StrCat("KV budget auto:", s.auto_risk, " (policy ", s.policy, ")")
                               : absl::StrCat("KV policy ", s.policy);
  return absl::InvalidArgumentError(absl::StrCat(
      what, " has no device form: the ", std::string(device),
      " backend keeps the KV cache in device memory, where only full, snapkv, pyramid, criticalkv and streaming "
      "with a fixed budget run (keydiff, mergereduce:* and auto:RISK read pages on the host; they need --device "
      "cpu)"));
}

}  // namespace kvserve
