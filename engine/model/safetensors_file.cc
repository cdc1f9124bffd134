// Parses and maps .safetensors files. Format: u64 little-endian header length N, N bytes of
// JSON {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}, then the
// data section that the offsets index into.
#include "engine/model/safetensors_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace kvserve {
namespace {

absl::StatusOr<DType> ParseDType(const std::string& name, const std::string& tensor) {
  if (name == "BF16") return DType::kBF16;
  if (name == "F16") return DType::kF16;
  if (name == "F32") return DType::kF32;
  return absl::InvalidArgumentError(absl::StrCat("tensor '", tensor, "' has unsupported dtype '",
                                                 name, "' (supported: BF16, F16, F32)"));
}

// Parses the header JSON into tensors with offsets relative to the data section; `data`
// is filled in later, once the offsets are validated.
absl::Status ParseHeader(std::string_view json_text, const std::string& path, uint64_t data_size,
                         const uint8_t* data, std::vector<SafetensorsTensor>* out) {
  nlohmann::json header = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": safetensors header is not a valid JSON object"));
  }
  struct Range {
    uint64_t begin, end;
    size_t index;
  };
  std::vector<Range> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const std::string& name = it.key();
    const nlohmann::json& v = it.value();
    auto bad = [&](const std::string& what) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor '", name, "': ", what, " in ", v.dump()));
    };
    if (!v.is_object() || !v.contains("dtype") || !v["dtype"].is_string() ||
        !v.contains("shape") || !v["shape"].is_array() || !v.contains("data_offsets") ||
        !v["data_offsets"].is_array() || v["data_offsets"].size() != 2) {
      return bad("expected {dtype: string, shape: [..], data_offsets: [begin, end]}");
    }
    SafetensorsTensor t;
    t.name = name;
    absl::StatusOr<DType> dt = ParseDType(v["dtype"].get<std::string>(), name);
    if (!dt.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", dt.status().message()));
    t.dtype = *dt;
    uint64_t elements = 1;
    for (const nlohmann::json& d : v["shape"]) {
      if (!d.is_number_unsigned()) return bad("shape entries must be non-negative integers");
      uint64_t n = d.get<uint64_t>();
      if (n != 0 && elements > (uint64_t{1} << 62) / n) return bad("shape is too large");
      elements *= n;
      t.shape.push_back(static_cast<int64_t>(n));
    }
    const nlohmann::json& off = v["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned()) {
      return bad("data_offsets must be non-negative integers");
    }
    uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (begin > end || end > data_size) {
      return bad(absl::StrCat("data_offsets [", begin, ", ", end,
                              "] lie outside the data section of ", data_size, " bytes"));
    }
    uint64_t want = elements * static_cast<uint64_t>(BlockBytes(t.dtype));
    if (end - begin != want) {
      return bad(absl::StrCat("data_offsets span ", end - begin, " bytes but shape x ",
                              std::string(DTypeName(t.dtype)), " needs ", want));
    }
    t.data = data + begin;
    t.nbytes = static_cast<int64_t>(want);
    ranges.push_back({begin, end, out->size()});
    out->push_back(std::move(t));
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].begin < ranges[i - 1].end) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": tensors '", (*out)[ranges[i - 1].index].name, "' [", ranges[i - 1].begin, ", ",
          ranges[i - 1].end, ") and '", (*out)[ranges[i].index].name, "' [", ranges[i].begin,
          ", ", ranges[i].end, ") overlap"));
    }
  }
  std::sort(out->begin(), out->end(),
            [](const SafetensorsTensor& a, const SafetensorsTensor& b) { return a.name < b.name; });
  return absl::OkStatus();
}

}  // namespace

int64_t SafetensorsTensor::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

absl::StatusOr<std::shared_ptr<const SafetensorsFile>> SafetensorsFile::Open(
    const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(absl::StrCat("cannot open '", path, "': ", std::strerror(errno)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return absl::InternalError(absl::StrCat("cannot stat '", path, "': ", std::strerror(err)));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": ", size, " bytes is too short for a safetensors file (needs an 8-byte header length)"));
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int map_err = errno;
  ::close(fd);  // the mapping keeps the file alive
  if (map == MAP_FAILED) {
    return absl::InternalError(absl::StrCat("cannot mmap '", path, "': ", std::strerror(map_err)));
  }
  // From here on the destructor unmaps, also on the error paths.
  std::shared_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  file->map_ = map;
  file->map_size_ = size;
  const uint8_t* bytes = static_cast<const uint8_t*>(map);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];
  if (header_len > size - 8) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": header length ", header_len,
                                                   " exceeds the file size ", size, " minus 8"));
  }
  std::string_view json_text(reinterpret_cast<const char*>(bytes + 8), header_len);
  const uint64_t data_start = 8 + header_len;
  absl::Status s =
      ParseHeader(json_text, path, size - data_start, bytes + data_start, &file->tensors_);
  if (!s.ok()) return s;
  return std::shared_ptr<const SafetensorsFile>(std::move(file));
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(map_, map_size_);
}

const SafetensorsTensor* SafetensorsFile::Find(std::string_view name) const {
  auto it = std::lower_bound(
      tensors_.begin(), tensors_.end(), name,
      [](const SafetensorsTensor& t, std::string_view n) { return t.name < n; });
  if (it == tensors_.end() || it->name != name) return nullptr;
  return &*it;
}

float Bf16ToF32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t F32ToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float F16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf / nan
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal: normalize
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    bits = sign | ((112 - e) << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

std::vector<float> TensorToF32(const SafetensorsTensor& t) {
  const int64_t n = t.NumElements();
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    if (t.dtype == DType::kF32) {
      std::memcpy(&out[i], t.data + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, t.data + 2 * i, 2);
      out[i] = t.dtype == DType::kBF16 ? Bf16ToF32(h) : F16ToF32(h);
    }
  }
  return out;
}

}  // namespace kvserve
