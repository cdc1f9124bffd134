// A parsed GGUF (v2/v3) file: metadata key/values and tensor infos over a read-only mmap.
// Parsing validates every length, count and offset against the file size, so a corrupt or
// hostile file yields an absl::Status naming the problem instead of a crash or a huge
// allocation. Metadata values stay as views into the mapping and are decoded on access.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/dtype.h"

namespace kvserve {

// GGUF metadata value types, numbered as in the file format.
enum class GgufType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

std::string_view GgufTypeName(GgufType t);

// One metadata value: a typed view of its encoded bytes inside the file. Cheap to copy;
// valid while the GgufFile (or a copy of it) is alive.
class GgufValue {
 public:
  GgufType type() const { return type_; }
  // For arrays: the element type and count.
  GgufType element_type() const { return elem_type_; }
  uint64_t size() const { return count_; }

  // Any integer type, converted to int64 (a uint64 above INT64_MAX is an error).
  absl::StatusOr<int64_t> AsInt() const;
  // float32/float64, or an integer type converted.
  absl::StatusOr<double> AsFloat() const;
  absl::StatusOr<bool> AsBool() const;
  absl::StatusOr<std::string> AsString() const;
  // The elements of an array of any type (nested arrays included).
  absl::StatusOr<std::vector<GgufValue>> AsArray() const;
  // Typed array conversions; elements must be of a matching kind (as the scalar getters).
  absl::StatusOr<std::vector<int64_t>> AsIntArray() const;
  absl::StatusOr<std::vector<double>> AsFloatArray() const;
  absl::StatusOr<std::vector<std::string>> AsStringArray() const;

 private:
  friend class GgufParser;
  GgufType type_ = GgufType::kUint8;
  GgufType elem_type_ = GgufType::kUint8;
  uint64_t count_ = 0;          // array element count
  const uint8_t* data_ = nullptr;  // the encoded value (array: its first element)
  uint64_t bytes_ = 0;          // encoded size from data_ (validated at parse time)
};

// A tensor as stored: GGML type, shape with shape[0] = ne0 the contiguous dimension.
struct GgufTensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;   // ne0, ne1, ...; 1..4 dims, each >= 1
  uint64_t offset = 0;          // relative to the data section
  const void* data = nullptr;
  uint64_t bytes = 0;

  int64_t elements() const;
};

class GgufFile {
 public:
  // Limits that reject absurd headers before anything is allocated from them.
  static constexpr uint64_t kMaxTensors = uint64_t{1} << 20;
  static constexpr uint64_t kMaxMetadata = uint64_t{1} << 20;
  static constexpr uint32_t kMaxDims = 4;
  static constexpr int kMaxArrayNesting = 8;

  // mmaps `path` read-only and parses it.
  static absl::StatusOr<GgufFile> Open(const std::string& path);
  // Parses bytes already in memory; `owner` keeps them alive (may be null if the caller
  // guarantees that). Used by Open, tests and the fuzzer.
  static absl::StatusOr<GgufFile> Parse(std::shared_ptr<const void> owner, const uint8_t* data,
                                        size_t size);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return size_; }
  // Keeps the mapping alive; hand it to Model::storage.
  std::shared_ptr<const void> storage() const { return owner_; }

  // Metadata, in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  bool Has(std::string_view key) const { return Find(key) != nullptr; }
  const GgufValue* Find(std::string_view key) const;
  // Typed getters: NotFound if absent, InvalidArgument (naming key and type) if mistyped.
  absl::StatusOr<int64_t> GetInt(std::string_view key) const;
  absl::StatusOr<double> GetFloat(std::string_view key) const;
  absl::StatusOr<bool> GetBool(std::string_view key) const;
  absl::StatusOr<std::string> GetString(std::string_view key) const;
  absl::StatusOr<std::vector<int64_t>> GetIntArray(std::string_view key) const;
  absl::StatusOr<std::vector<double>> GetFloatArray(std::string_view key) const;
  absl::StatusOr<std::vector<std::string>> GetStringArray(std::string_view key) const;
  absl::StatusOr<std::vector<GgufValue>> GetArray(std::string_view key) const;

  // Tensors, in file order.
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* FindTensor(std::string_view name) const;
  // NotFound naming the tensor if absent.
  absl::StatusOr<GgufTensor> Tensor(std::string_view name) const;

 private:
  friend class GgufParser;
  std::shared_ptr<const void> owner_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace kvserve
