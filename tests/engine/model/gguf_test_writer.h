// Test helper: serialises GGUF metadata and tensors into bytes or a file, so tests can
// build exact files (including deliberately broken ones) without external tools.
#pragma once
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "engine/model/gguf_file.h"
#include "kernels/dtype.h"

// Substring check for error messages (the suite links gtest without gmock).
#define EXPECT_HAS(str, sub)                                                  \
  EXPECT_NE(std::string(str).find(sub), std::string::npos)                    \
      << "expected \"" << (sub) << "\" in: " << (str)

namespace kvserve::testing {

// Little-endian encoders for GGUF primitives.
template <typename T>
std::string GgufEnc(T v) {
  std::string s(sizeof(T), '\0');
  std::memcpy(s.data(), &v, sizeof(T));
  return s;
}
inline std::string GgufEncStr(const std::string& s) { return GgufEnc<uint64_t>(s.size()) + s; }

// The encoding of an array value (without the leading value type): element type, count,
// then the already-encoded elements.
inline std::string GgufArrayBody(GgufType elem, uint64_t count, const std::string& elems) {
  return GgufEnc<uint32_t>(static_cast<uint32_t>(elem)) + GgufEnc<uint64_t>(count) + elems;
}

class GgufTestWriter {
 public:
  // Adds a metadata entry whose value is already encoded.
  void AddRaw(const std::string& key, GgufType type, const std::string& encoded) {
    kv_ += GgufEncStr(key) + GgufEnc<uint32_t>(static_cast<uint32_t>(type)) + encoded;
    ++n_kv_;
  }
  template <typename T>
  void Add(const std::string& key, GgufType type, T v) { AddRaw(key, type, GgufEnc<T>(v)); }
  void AddU32(const std::string& key, uint32_t v) { Add(key, GgufType::kUint32, v); }
  void AddI32(const std::string& key, int32_t v) { Add(key, GgufType::kInt32, v); }
  void AddF32(const std::string& key, float v) { Add(key, GgufType::kFloat32, v); }
  void AddBool(const std::string& key, bool v) { Add<uint8_t>(key, GgufType::kBool, v ? 1 : 0); }
  void AddString(const std::string& key, const std::string& v) {
    AddRaw(key, GgufType::kString, GgufEncStr(v));
  }
  void AddStringArray(const std::string& key, const std::vector<std::string>& v) {
    std::string e;
    for (const std::string& s : v) e += GgufEncStr(s);
    AddRaw(key, GgufType::kArray, GgufArrayBody(GgufType::kString, v.size(), e));
  }
  template <typename T>
  void AddArray(const std::string& key, GgufType elem, const std::vector<T>& v) {
    std::string e;
    for (const T& x : v) e += GgufEnc<T>(x);
    AddRaw(key, GgufType::kArray, GgufArrayBody(elem, v.size(), e));
  }

  // Adds a tensor with shape ne (ne[0] contiguous) and its raw bytes; the offset is the
  // next aligned position unless `offset` is given (to build broken files).
  void AddTensor(const std::string& name, uint32_t type_id, const std::vector<uint64_t>& ne,
                 const std::string& bytes, int64_t offset = -1) {
    while (data_.size() % alignment_ != 0) data_.push_back('\0');
    const uint64_t off = offset >= 0 ? static_cast<uint64_t>(offset) : data_.size();
    info_ += GgufEncStr(name) + GgufEnc<uint32_t>(static_cast<uint32_t>(ne.size()));
    for (uint64_t d : ne) info_ += GgufEnc<uint64_t>(d);
    info_ += GgufEnc<uint32_t>(type_id) + GgufEnc<uint64_t>(off);
    data_ += bytes;
    ++n_tensors_;
  }
  void AddTensor(const std::string& name, DType t, const std::vector<uint64_t>& ne,
                 const std::string& bytes) {
    AddTensor(name, static_cast<uint32_t>(t), ne, bytes);
  }
  // An F32 tensor filled with `value`.
  void AddF32Tensor(const std::string& name, const std::vector<uint64_t>& ne, float value = 1.0f) {
    uint64_t n = 1;
    for (uint64_t d : ne) n *= d;
    std::string bytes;
    for (uint64_t i = 0; i < n; ++i) bytes += GgufEnc<float>(value);
    AddTensor(name, DType::kF32, ne, bytes);
  }

  // Use a non-default alignment; also writes general.alignment. Call before AddTensor.
  void SetAlignment(uint32_t a) {
    alignment_ = a;
    AddU32("general.alignment", a);
  }

  // Byte offset, within Serialize()'s output, where the header ends and metadata begins.
  static constexpr size_t kHeaderBytes = 24;
  size_t metadata_bytes() const { return kv_.size(); }
  size_t tensor_info_bytes() const { return info_.size(); }

  std::string Serialize(uint32_t version = 3) const {
    std::string out = GgufEnc<uint32_t>(0x46554747) + GgufEnc<uint32_t>(version) +
                      GgufEnc<uint64_t>(n_tensors_) + GgufEnc<uint64_t>(n_kv_) + kv_ + info_;
    while (out.size() % alignment_ != 0) out.push_back('\0');
    return out + data_;
  }

  static bool WriteFile(const std::string& path, const std::string& bytes) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return static_cast<bool>(f);
  }

 private:
  std::string kv_, info_, data_;
  uint64_t n_kv_ = 0, n_tensors_ = 0;
  uint64_t alignment_ = 32;
};

}  // namespace kvserve::testing
