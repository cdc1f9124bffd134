// GGUF parsing: a bounds-checked cursor over the mapped bytes validates the header, every
// metadata value and every tensor info before any of it is trusted or allocated from.
#include "engine/model/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iterator>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kvserve {

std::string_view GgufTypeName(GgufType t) {
  switch (t) {
    case GgufType::kUint8: return "uint8";
    case GgufType::kInt8: return "int8";
    case GgufType::kUint16: return "uint16";
    case GgufType::kInt16: return "int16";
    case GgufType::kUint32: return "uint32";
    case GgufType::kInt32: return "int32";
    case GgufType::kFloat32: return "float32";
    case GgufType::kBool: return "bool";
    case GgufType::kString: return "string";
    case GgufType::kArray: return "array";
    case GgufType::kUint64: return "uint64";
    case GgufType::kInt64: return "int64";
    case GgufType::kFloat64: return "float64";
  }
  return "?";
}

namespace {

// This abseil build has its own string_view type; StrCat/StrFormat accept only that one.
absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
constexpr uint64_t kDefaultAlignment = 32;

template <typename T>
T Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Encoded size of a fixed-size value type; 0 for string and array (variable size).
uint64_t FixedSize(GgufType t) {
  switch (t) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool: return 1;
    case GgufType::kUint16:
    case GgufType::kInt16: return 2;
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kFloat32: return 4;
    case GgufType::kUint64:
    case GgufType::kInt64:
    case GgufType::kFloat64: return 8;
    case GgufType::kString:
    case GgufType::kArray: return 0;
  }
  return 0;
}

bool IsKnownType(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::kFloat64); }

bool IsIntType(GgufType t) {
  switch (t) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kUint16:
    case GgufType::kInt16:
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kUint64:
    case GgufType::kInt64: return true;
    default: return false;
  }
}

// Names of GGML tensor types kvserve does not read, so an error can say what the file has.
std::string_view GgmlTypeName(uint32_t id) {
  static constexpr std::string_view kNames[] = {
      "F32",  "F16",  "Q4_0",   "Q4_1",   "Q4_2",  "Q4_3",  "Q5_0",  "Q5_1",  "Q8_0",
      "Q8_1", "Q2_K", "Q3_K",   "Q4_K",   "Q5_K",  "Q6_K",  "Q8_K",  "IQ2_XXS", "IQ2_XS",
      "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8", "I16", "I32", "I64",
      "F64", "IQ1_M", "BF16"};
  return id < std::size(kNames) ? kNames[id] : "unknown";
}

// Decodes a scalar integer value at p (the type is known to be an integer type).
bool DecodeInt(GgufType t, const uint8_t* p, int64_t* out) {
  switch (t) {
    case GgufType::kUint8: *out = Load<uint8_t>(p); return true;
    case GgufType::kInt8: *out = Load<int8_t>(p); return true;
    case GgufType::kUint16: *out = Load<uint16_t>(p); return true;
    case GgufType::kInt16: *out = Load<int16_t>(p); return true;
    case GgufType::kUint32: *out = Load<uint32_t>(p); return true;
    case GgufType::kInt32: *out = Load<int32_t>(p); return true;
    case GgufType::kInt64: *out = Load<int64_t>(p); return true;
    case GgufType::kUint64: {
      const uint64_t u = Load<uint64_t>(p);
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
      *out = static_cast<int64_t>(u);
      return true;
    }
    default: return false;
  }
}

absl::Status WrongType(absl::string_view want, GgufType got) {
  return absl::InvalidArgumentError(
      absl::StrCat("GGUF value is ", Sv(GgufTypeName(got)), ", expected ", want));
}

// The encoded size of the element at p of type t; only used on already validated bytes.
uint64_t EncodedSize(GgufType t, const uint8_t* p) {
  if (uint64_t s = FixedSize(t)) return s;
  if (t == GgufType::kString) return 8 + Load<uint64_t>(p);
  const GgufType elem = static_cast<GgufType>(Load<uint32_t>(p));
  const uint64_t count = Load<uint64_t>(p + 4);
  uint64_t size = 12;
  if (uint64_t s = FixedSize(elem)) return size + s * count;
  for (uint64_t i = 0; i < count; ++i) size += EncodedSize(elem, p + size);
  return size;
}

absl::Status Annotate(const absl::Status& s, std::string_view key) {
  return absl::Status(s.code(), absl::StrCat("metadata '", Sv(key), "': ", s.message()));
}

}  // namespace

// ---- GgufValue ------------------------------------------------------------------------

absl::StatusOr<int64_t> GgufValue::AsInt() const {
  if (!IsIntType(type_)) return WrongType("an integer", type_);
  int64_t v = 0;
  if (!DecodeInt(type_, data_, &v)) {
    return absl::OutOfRangeError(
        absl::StrCat("uint64 value ", Load<uint64_t>(data_), " does not fit in int64"));
  }
  return v;
}

absl::StatusOr<double> GgufValue::AsFloat() const {
  if (type_ == GgufType::kFloat32) return static_cast<double>(Load<float>(data_));
  if (type_ == GgufType::kFloat64) return Load<double>(data_);
  if (IsIntType(type_)) {
    absl::StatusOr<int64_t> v = AsInt();
    if (!v.ok()) return v.status();
    return static_cast<double>(*v);
  }
  return WrongType("a number", type_);
}

absl::StatusOr<bool> GgufValue::AsBool() const {
  if (type_ != GgufType::kBool) return WrongType("bool", type_);
  return data_[0] != 0;
}

absl::StatusOr<std::string> GgufValue::AsString() const {
  if (type_ != GgufType::kString) return WrongType("string", type_);
  const uint64_t len = Load<uint64_t>(data_);
  return std::string(reinterpret_cast<const char*>(data_ + 8), len);
}

absl::StatusOr<std::vector<GgufValue>> GgufValue::AsArray() const {
  if (type_ != GgufType::kArray) return WrongType("array", type_);
  std::vector<GgufValue> out;
  out.reserve(count_);  // bounded: parsing checked count against the bytes it spans
  const uint8_t* p = data_;
  for (uint64_t i = 0; i < count_; ++i) {
    GgufValue v;
    v.type_ = elem_type_;
    if (elem_type_ == GgufType::kArray) {
      v.elem_type_ = static_cast<GgufType>(Load<uint32_t>(p));
      v.count_ = Load<uint64_t>(p + 4);
      v.bytes_ = EncodedSize(GgufType::kArray, p) - 12;
      v.data_ = p + 12;
      p += 12 + v.bytes_;
    } else {
      v.data_ = p;
      v.bytes_ = EncodedSize(elem_type_, p);
      p += v.bytes_;
    }
    out.push_back(v);
  }
  return out;
}

absl::StatusOr<std::vector<int64_t>> GgufValue::AsIntArray() const {
  if (type_ != GgufType::kArray) return WrongType("array", type_);
  if (!IsIntType(elem_type_)) {
    return absl::InvalidArgumentError(
        absl::StrCat("array of ", Sv(GgufTypeName(elem_type_)), ", expected array of integers"));
  }
  const uint64_t s = FixedSize(elem_type_);
  std::vector<int64_t> out(count_);
  for (uint64_t i = 0; i < count_; ++i) {
    if (!DecodeInt(elem_type_, data_ + i * s, &out[i])) {
      return absl::OutOfRangeError(absl::StrCat("array element ", i, " (",
                                                Load<uint64_t>(data_ + i * s),
                                                ") does not fit in int64"));
    }
  }
  return out;
}

absl::StatusOr<std::vector<double>> GgufValue::AsFloatArray() const {
  if (type_ != GgufType::kArray) return WrongType("array", type_);
  std::vector<double> out(count_);
  const uint64_t s = FixedSize(elem_type_);
  if (elem_type_ == GgufType::kFloat32) {
    for (uint64_t i = 0; i < count_; ++i) out[i] = Load<float>(data_ + i * s);
  } else if (elem_type_ == GgufType::kFloat64) {
    for (uint64_t i = 0; i < count_; ++i) out[i] = Load<double>(data_ + i * s);
  } else if (IsIntType(elem_type_)) {
    absl::StatusOr<std::vector<int64_t>> ints = AsIntArray();
    if (!ints.ok()) return ints.status();
    for (uint64_t i = 0; i < count_; ++i) out[i] = static_cast<double>((*ints)[i]);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("array of ", Sv(GgufTypeName(elem_type_)), ", expected array of numbers"));
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> GgufValue::AsStringArray() const {
  if (type_ != GgufType::kArray) return WrongType("array", type_);
  if (elem_type_ != GgufType::kString) {
    return absl::InvalidArgumentError(
        absl::StrCat("array of ", Sv(GgufTypeName(elem_type_)), ", expected array of strings"));
  }
  std::vector<std::string> out;
  out.reserve(count_);
  const uint8_t* p = data_;
  for (uint64_t i = 0; i < count_; ++i) {
    const uint64_t len = Load<uint64_t>(p);
    out.emplace_back(reinterpret_cast<const char*>(p + 8), len);
    p += 8 + len;
  }
  return out;
}

int64_t GgufTensor::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// ---- Parser ---------------------------------------------------------------------------

class GgufParser {
 public:
  GgufParser(const uint8_t* data, uint64_t size) : p_(data), size_(size) {}

  absl::Status Run(GgufFile& f);

 private:
  uint64_t remaining() const { return size_ - pos_; }

  // Every read goes through Need(): it is the single place bounds are enforced.
  absl::Status Need(uint64_t n, absl::string_view what) {
    if (n > remaining()) {
      return absl::DataLossError(absl::StrFormat(
          "truncated GGUF file: %s needs %u bytes at offset %u, but the file has %u bytes",
          what, n, pos_, size_));
    }
    return absl::OkStatus();
  }

  template <typename T>
  absl::StatusOr<T> Read(absl::string_view what) {
    if (absl::Status s = Need(sizeof(T), what); !s.ok()) return s;
    T v = Load<T>(p_ + pos_);
    pos_ += sizeof(T);
    return v;
  }

  absl::StatusOr<std::string> ReadString(absl::string_view what) {
    absl::StatusOr<uint64_t> len = Read<uint64_t>(what);
    if (!len.ok()) return len.status();
    if (*len > remaining()) {
      return absl::DataLossError(absl::StrFormat(
          "%s: string length %u at offset %u runs past the end of the file (%u bytes)", what,
          *len, pos_ - 8, size_));
    }
    std::string s(reinterpret_cast<const char*>(p_ + pos_), *len);
    pos_ += *len;
    return s;
  }

  // Validates (and skips over) one value of type t at the cursor.
  absl::Status SkipValue(GgufType t, int depth, absl::string_view what);
  absl::StatusOr<GgufValue> ParseValue(uint32_t type_id, absl::string_view what);
  absl::Status ParseTensorInfo(GgufFile& f, uint64_t index);

  const uint8_t* p_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

absl::Status GgufParser::SkipValue(GgufType t, int depth, absl::string_view what) {
  if (uint64_t s = FixedSize(t)) {
    if (absl::Status st = Need(s, what); !st.ok()) return st;
    pos_ += s;
    return absl::OkStatus();
  }
  if (t == GgufType::kString) {
    absl::StatusOr<uint64_t> len = Read<uint64_t>(what);
    if (!len.ok()) return len.status();
    if (*len > remaining()) {
      return absl::DataLossError(absl::StrFormat(
          "%s: string length %u at offset %u runs past the end of the file (%u bytes)", what,
          *len, pos_ - 8, size_));
    }
    pos_ += *len;
    return absl::OkStatus();
  }
  // Array: element type, count, elements.
  if (depth >= GgufFile::kMaxArrayNesting) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": arrays nested deeper than ", GgufFile::kMaxArrayNesting, " levels"));
  }
  const uint64_t start = pos_;
  absl::StatusOr<uint32_t> elem_id = Read<uint32_t>(what);
  if (!elem_id.ok()) return elem_id.status();
  if (!IsKnownType(*elem_id)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": unknown array element type id ", *elem_id));
  }
  const GgufType elem = static_cast<GgufType>(*elem_id);
  absl::StatusOr<uint64_t> count = Read<uint64_t>(what);
  if (!count.ok()) return count.status();
  // Every element takes at least this many bytes, so the count is bounded by the bytes
  // left; checking first keeps a hostile count from looping or allocating.
  const uint64_t min_size = FixedSize(elem) ? FixedSize(elem) : (elem == GgufType::kString ? 8 : 12);
  if (*count > remaining() / min_size) {
    return absl::DataLossError(absl::StrFormat(
        "%s: array of %u %s elements at offset %u needs at least %u bytes, but only %u remain "
        "in the file",
        what, *count, Sv(GgufTypeName(elem)), start, min_size, remaining()));
  }
  if (FixedSize(elem)) {
    pos_ += *count * min_size;
    return absl::OkStatus();
  }
  for (uint64_t i = 0; i < *count; ++i) {
    if (absl::Status s = SkipValue(elem, depth + 1, what); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<GgufValue> GgufParser::ParseValue(uint32_t type_id, absl::string_view what) {
  if (!IsKnownType(type_id)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": unknown value type id ", type_id));
  }
  GgufValue v;
  v.type_ = static_cast<GgufType>(type_id);
  const uint64_t start = pos_;
  if (absl::Status s = SkipValue(v.type_, 0, what); !s.ok()) return s;
  if (v.type_ == GgufType::kArray) {
    v.elem_type_ = static_cast<GgufType>(Load<uint32_t>(p_ + start));
    v.count_ = Load<uint64_t>(p_ + start + 4);
    v.data_ = p_ + start + 12;
    v.bytes_ = pos_ - start - 12;
  } else {
    v.data_ = p_ + start;
    v.bytes_ = pos_ - start;
  }
  return v;
}

absl::Status GgufParser::ParseTensorInfo(GgufFile& f, uint64_t index) {
  const std::string what = absl::StrCat("tensor info ", index);
  GgufTensor t;
  absl::StatusOr<std::string> name = ReadString(absl::StrCat(what, " name"));
  if (!name.ok()) return name.status();
  t.name = std::move(*name);
  const std::string ctx = absl::StrCat("tensor '", t.name, "'");
  absl::StatusOr<uint32_t> n_dims = Read<uint32_t>(ctx);
  if (!n_dims.ok()) return n_dims.status();
  if (*n_dims == 0 || *n_dims > GgufFile::kMaxDims) {
    return absl::InvalidArgumentError(absl::StrCat(ctx, " has ", *n_dims,
                                                   " dimensions; expected 1 to ",
                                                   GgufFile::kMaxDims));
  }
  // Elements are bounded by 2^62 so byte counts and element products never overflow.
  constexpr uint64_t kMaxElements = uint64_t{1} << 62;
  uint64_t elements = 1;
  for (uint32_t d = 0; d < *n_dims; ++d) {
    absl::StatusOr<uint64_t> ne = Read<uint64_t>(ctx);
    if (!ne.ok()) return ne.status();
    if (*ne == 0 || *ne > kMaxElements || elements > kMaxElements / *ne) {
      return absl::InvalidArgumentError(absl::StrCat(
          ctx, ": dimension ", d, " = ", *ne,
          *ne == 0 ? " is zero" : " makes the element count overflow (limit 2^62)"));
    }
    elements *= *ne;
    t.shape.push_back(static_cast<int64_t>(*ne));
  }
  absl::StatusOr<uint32_t> type_id = Read<uint32_t>(ctx);
  if (!type_id.ok()) return type_id.status();
  if (!IsSupportedWeightType(*type_id)) {
    return absl::UnimplementedError(absl::StrCat(ctx, " has unsupported tensor type id ",
                                                 *type_id, " (", Sv(GgmlTypeName(*type_id)), ")"));
  }
  t.dtype = static_cast<DType>(*type_id);
  const int64_t block = BlockElements(t.dtype);
  if (t.shape[0] % block != 0) {
    return absl::InvalidArgumentError(absl::StrCat(ctx, ": ne0 = ", t.shape[0],
                                                   " is not a multiple of the ",
                                                   Sv(DTypeName(t.dtype)), " block size ", block));
  }
  // bytes = blocks * block_bytes with block_bytes <= 256: bounding blocks keeps it < 2^62.
  const uint64_t blocks = elements / static_cast<uint64_t>(block);
  if (blocks > (uint64_t{1} << 62) / 256) {
    return absl::InvalidArgumentError(
        absl::StrCat(ctx, ": ", elements, " elements make the byte size overflow"));
  }
  t.bytes = blocks * static_cast<uint64_t>(BlockBytes(t.dtype));
  absl::StatusOr<uint64_t> offset = Read<uint64_t>(ctx);
  if (!offset.ok()) return offset.status();
  t.offset = *offset;
  if (f.tensor_index_.count(t.name)) {
    return absl::InvalidArgumentError(absl::StrCat("duplicate ", ctx));
  }
  f.tensor_index_.emplace(t.name, f.tensors_.size());
  f.tensors_.push_back(std::move(t));
  return absl::OkStatus();
}

absl::Status GgufParser::Run(GgufFile& f) {
  absl::StatusOr<uint32_t> magic = Read<uint32_t>("the magic number");
  if (!magic.ok()) return magic.status();
  if (*magic != kMagic) {
    std::string shown;
    for (int i = 0; i < 4; ++i) {
      const char c = static_cast<char>(p_[i]);
      shown += (c >= 0x20 && c < 0x7f) ? std::string(1, c) : absl::StrFormat("\\x%02x", p_[i]);
    }
    return absl::InvalidArgumentError(absl::StrFormat(
        "not a GGUF file: wrong magic '%s' (0x%08x), expected 'GGUF'", shown, *magic));
  }
  absl::StatusOr<uint32_t> version = Read<uint32_t>("the version");
  if (!version.ok()) return version.status();
  if (*version != 2 && *version != 3) {
    std::string hint;
    if (*version == 1) hint = " (GGUF v1 uses 32-bit counts and is not supported)";
    if (*version == 0x02000000u || *version == 0x03000000u) hint = " (a big-endian GGUF?)";
    return absl::UnimplementedError(absl::StrCat("unsupported GGUF version ", *version,
                                                 hint, "; kvserve reads versions 2 and 3"));
  }
  f.version_ = *version;
  absl::StatusOr<uint64_t> n_tensors = Read<uint64_t>("the tensor count");
  if (!n_tensors.ok()) return n_tensors.status();
  absl::StatusOr<uint64_t> n_kv = Read<uint64_t>("the metadata count");
  if (!n_kv.ok()) return n_kv.status();
  if (*n_tensors > GgufFile::kMaxTensors) {
    return absl::InvalidArgumentError(absl::StrCat(
        "absurd tensor count ", *n_tensors, " (limit ", GgufFile::kMaxTensors, ")"));
  }
  if (*n_kv > GgufFile::kMaxMetadata) {
    return absl::InvalidArgumentError(absl::StrCat(
        "absurd metadata count ", *n_kv, " (limit ", GgufFile::kMaxMetadata, ")"));
  }

  for (uint64_t i = 0; i < *n_kv; ++i) {
    absl::StatusOr<std::string> key = ReadString(absl::StrCat("key of metadata entry ", i));
    if (!key.ok()) return key.status();
    const std::string what = absl::StrCat("metadata '", *key, "'");
    absl::StatusOr<uint32_t> type_id = Read<uint32_t>(what);
    if (!type_id.ok()) return type_id.status();
    absl::StatusOr<GgufValue> value = ParseValue(*type_id, what);
    if (!value.ok()) return value.status();
    if (f.kv_index_.count(*key)) return absl::InvalidArgumentError(absl::StrCat("duplicate ", what));
    f.kv_index_.emplace(*key, f.kv_.size());
    f.kv_.emplace_back(std::move(*key), *value);
  }

  f.alignment_ = kDefaultAlignment;
  if (const GgufValue* a = f.Find("general.alignment")) {
    absl::StatusOr<int64_t> align = a->AsInt();
    if (!align.ok()) return Annotate(align.status(), "general.alignment");
    if (*align <= 0 || (*align & (*align - 1)) != 0 || *align > (int64_t{1} << 30)) {
      return absl::InvalidArgumentError(
          absl::StrCat("general.alignment = ", *align, " is not a power of two up to 2^30"));
    }
    f.alignment_ = static_cast<uint64_t>(*align);
  }

  for (uint64_t i = 0; i < *n_tensors; ++i) {
    if (absl::Status s = ParseTensorInfo(f, i); !s.ok()) return s;
  }

  // The data section starts at the next multiple of the alignment (pos_ <= size_ < 2^63).
  f.data_offset_ = (pos_ + f.alignment_ - 1) / f.alignment_ * f.alignment_;
  const uint64_t data_bytes = f.data_offset_ <= size_ ? size_ - f.data_offset_ : 0;
  for (GgufTensor& t : f.tensors_) {
    if (t.offset % f.alignment_ != 0) {
      return absl::InvalidArgumentError(absl::StrCat("tensor '", t.name, "' offset ", t.offset,
                                                     " is not a multiple of the alignment ",
                                                     f.alignment_));
    }
    if (f.data_offset_ > size_ || t.offset > data_bytes || t.bytes > data_bytes - t.offset) {
      return absl::DataLossError(absl::StrFormat(
          "tensor '%s' data (offset %u, %u bytes) lies outside the file: the data section at "
          "offset %u holds %u bytes (file is %u bytes; truncated?)",
          t.name, t.offset, t.bytes, f.data_offset_, data_bytes, size_));
    }
    t.data = p_ + f.data_offset_ + t.offset;
  }
  return absl::OkStatus();
}

// ---- GgufFile -------------------------------------------------------------------------

absl::StatusOr<GgufFile> GgufFile::Parse(std::shared_ptr<const void> owner, const uint8_t* data,
                                         size_t size) {
  GgufFile f;
  f.owner_ = std::move(owner);
  f.base_ = data;
  f.size_ = size;
  GgufParser parser(data, size);
  if (absl::Status s = parser.Run(f); !s.ok()) return s;
  return f;
}

namespace {

// Owns one read-only mapping; destroyed when the last Model/GgufFile referencing it goes.
struct Mapping {
  void* addr = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (addr != nullptr) munmap(addr, size);
  }
};

}  // namespace

absl::StatusOr<GgufFile> GgufFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return absl::ErrnoToStatus(err, absl::StrCat("cannot open GGUF file '", path, "'"));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is not a regular file"));
  }
  auto mapping = std::make_shared<Mapping>();
  mapping->size = static_cast<size_t>(st.st_size);
  if (mapping->size > 0) {
    void* addr = mmap(nullptr, mapping->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return absl::ErrnoToStatus(err, absl::StrCat("cannot mmap GGUF file '", path, "'"));
    }
    mapping->addr = addr;
  }
  ::close(fd);  // the mapping stays valid without the descriptor
  const uint8_t* data = static_cast<const uint8_t*>(mapping->addr);
  const size_t size = mapping->size;
  absl::StatusOr<GgufFile> f = Parse(std::move(mapping), data, size);
  if (!f.ok()) {
    return absl::Status(f.status().code(), absl::StrCat(path, ": ", f.status().message()));
  }
  return f;
}

const GgufValue* GgufFile::Find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

namespace {

template <typename T, typename Fn>
absl::StatusOr<T> Get(const GgufFile& f, std::string_view key, Fn fn) {
  const GgufValue* v = f.Find(key);
  if (v == nullptr) return absl::NotFoundError(absl::StrCat("GGUF metadata '", Sv(key), "' is missing"));
  absl::StatusOr<T> r = fn(*v);
  if (!r.ok()) return Annotate(r.status(), key);
  return r;
}

}  // namespace

absl::StatusOr<int64_t> GgufFile::GetInt(std::string_view key) const {
  return Get<int64_t>(*this, key, [](const GgufValue& v) { return v.AsInt(); });
}
absl::StatusOr<double> GgufFile::GetFloat(std::string_view key) const {
  return Get<double>(*this, key, [](const GgufValue& v) { return v.AsFloat(); });
}
absl::StatusOr<bool> GgufFile::GetBool(std::string_view key) const {
  return Get<bool>(*this, key, [](const GgufValue& v) { return v.AsBool(); });
}
absl::StatusOr<std::string> GgufFile::GetString(std::string_view key) const {
  return Get<std::string>(*this, key, [](const GgufValue& v) { return v.AsString(); });
}
absl::StatusOr<std::vector<int64_t>> GgufFile::GetIntArray(std::string_view key) const {
  return Get<std::vector<int64_t>>(*this, key, [](const GgufValue& v) { return v.AsIntArray(); });
}
absl::StatusOr<std::vector<double>> GgufFile::GetFloatArray(std::string_view key) const {
  return Get<std::vector<double>>(*this, key, [](const GgufValue& v) { return v.AsFloatArray(); });
}
absl::StatusOr<std::vector<std::string>> GgufFile::GetStringArray(std::string_view key) const {
  return Get<std::vector<std::string>>(*this, key,
                                       [](const GgufValue& v) { return v.AsStringArray(); });
}
absl::StatusOr<std::vector<GgufValue>> GgufFile::GetArray(std::string_view key) const {
  return Get<std::vector<GgufValue>>(*this, key, [](const GgufValue& v) { return v.AsArray(); });
}

const GgufTensor* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

absl::StatusOr<GgufTensor> GgufFile::Tensor(std::string_view name) const {
  if (const GgufTensor* t = FindTensor(name)) return *t;
  return absl::NotFoundError(absl::StrCat("GGUF tensor '", Sv(name), "' is missing"));
}

}  // namespace kvserve
