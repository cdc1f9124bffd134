// libFuzzer target for the GGUF parser: any input must either parse or return a Status,
// and whatever parses must be fully readable (every metadata value decoded, the first row
// of every tensor dequantized) without touching memory outside the input.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/model/gguf_file.h"
#include "kernels/cpu/dequantize.h"

namespace {

void Touch(const kvserve::GgufValue& v, int depth) {
  (void)v.AsInt();
  (void)v.AsFloat();
  (void)v.AsBool();
  (void)v.AsString();
  (void)v.AsIntArray();
  (void)v.AsFloatArray();
  (void)v.AsStringArray();
  if (depth > 8) return;
  absl::StatusOr<std::vector<kvserve::GgufValue>> items = v.AsArray();
  if (!items.ok()) return;
  for (const kvserve::GgufValue& e : *items) Touch(e, depth + 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<kvserve::GgufFile> f = kvserve::GgufFile::Parse(nullptr, data, size);
  if (!f.ok()) return 0;
  for (const auto& [key, value] : f->metadata()) Touch(value, 0);
  std::vector<float> row;
  for (const kvserve::GgufTensor& t : f->tensors()) {
    if (t.shape[0] > 65536) continue;  // keep the scratch row small
    row.resize(static_cast<size_t>(t.shape[0]));
    kvserve::DequantizeRow(t.dtype, t.data, row.data(), t.shape[0]);
  }
  return 0;
}
