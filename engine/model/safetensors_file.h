// A read-only, mmapped .safetensors file: the JSON header parsed and checked, tensors as
// views into the mapping.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/dtype.h"

namespace kvserve {

struct SafetensorsTensor {
  std::string name;
  DType dtype = DType::kF32;     // kBF16, kF16 or kF32
  std::vector<int64_t> shape;    // as stored (torch order: [out, in] for linear weights)
  const uint8_t* data = nullptr; // into the mapping; not necessarily aligned
  int64_t nbytes = 0;

  int64_t NumElements() const;
};

class SafetensorsFile {
 public:
  // Maps `path` and validates the header: every tensor's dtype is supported, its byte range
  // lies inside the data section, matches shape * element size, and overlaps no other.
  static absl::StatusOr<std::shared_ptr<const SafetensorsFile>> Open(const std::string& path);

  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  // nullptr when absent.
  const SafetensorsTensor* Find(std::string_view name) const;
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const std::string& path() const { return path_; }

 private:
  SafetensorsFile() = default;

  std::string path_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  std::vector<SafetensorsTensor> tensors_;  // sorted by name
};

// The tensor's elements widened to float (bf16/f16 converted exactly).
std::vector<float> TensorToF32(const SafetensorsTensor& t);

// Scalar conversions, exposed for tests and the random model.
float Bf16ToF32(uint16_t h);
uint16_t F32ToBf16(float f);  // round to nearest even
float F16ToF32(uint16_t h);

}  // namespace kvserve
