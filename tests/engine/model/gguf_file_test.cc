// GgufFile: metadata of every type and tensors round-trip through a file written by the
// test, and every kind of broken file is rejected with a message that names the problem.
#include "engine/model/gguf_file.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "tests/engine/model/gguf_test_writer.h"

namespace kvserve {
namespace {

using testing::GgufArrayBody;
using testing::GgufEnc;
using testing::GgufEncStr;
using testing::GgufTestWriter;

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          (name + "_" + std::to_string(::getpid()) + ".gguf"))
      .string();
}

// Parses bytes from an exactly-sized heap copy, so any over-read is past the allocation.
absl::StatusOr<GgufFile> ParseBytes(const std::string& bytes) {
  auto copy = std::make_shared<std::vector<uint8_t>>(bytes.begin(), bytes.end());
  const uint8_t* data = copy->data();
  return GgufFile::Parse(copy, data, copy->size());
}

std::string Q8Block(float d, int8_t start) {
  std::string b = GgufEnc<uint16_t>(d == 1.0f ? 0x3c00 : 0x3800);  // fp16 1.0 or 0.5
  for (int i = 0; i < 32; ++i) b += static_cast<char>(static_cast<int8_t>(start + i));
  return b;
}

TEST(GgufFile, RoundTripsEveryMetadataType) {
  GgufTestWriter w;
  w.Add<uint8_t>("u8", GgufType::kUint8, 200);
  w.Add<int8_t>("i8", GgufType::kInt8, -100);
  w.Add<uint16_t>("u16", GgufType::kUint16, 60000);
  w.Add<int16_t>("i16", GgufType::kInt16, -30000);
  w.Add<uint32_t>("u32", GgufType::kUint32, 4000000000u);
  w.Add<int32_t>("i32", GgufType::kInt32, -2000000000);
  w.Add<uint64_t>("u64", GgufType::kUint64, uint64_t{1} << 40);
  w.Add<uint64_t>("u64_huge", GgufType::kUint64, (uint64_t{1} << 63) + 5);
  w.Add<int64_t>("i64", GgufType::kInt64, -(int64_t{1} << 62));
  w.AddF32("f32", 1.5f);
  w.Add<double>("f64", GgufType::kFloat64, 3.141592653589793);
  w.AddBool("yes", true);
  w.AddBool("no", false);
  w.AddString("str", std::string("h\xc3\xa9llo\0world", 12));
  w.AddString("empty", "");
  w.AddArray<uint8_t>("a_u8", GgufType::kUint8, {0, 255});
  w.AddArray<int8_t>("a_i8", GgufType::kInt8, {-128, 127});
  w.AddArray<uint16_t>("a_u16", GgufType::kUint16, {1, 65535});
  w.AddArray<int16_t>("a_i16", GgufType::kInt16, {-32768, 7});
  w.AddArray<uint32_t>("a_u32", GgufType::kUint32, {4294967295u});
  w.AddArray<int32_t>("a_i32", GgufType::kInt32, {-1, 0, 1});
  w.AddArray<uint64_t>("a_u64", GgufType::kUint64, {12345678901ull});
  w.AddArray<int64_t>("a_i64", GgufType::kInt64, {std::numeric_limits<int64_t>::min()});
  w.AddArray<float>("a_f32", GgufType::kFloat32, {0.25f, -2.0f});
  w.AddArray<double>("a_f64", GgufType::kFloat64, {1e300});
  w.AddArray<uint8_t>("a_bool", GgufType::kBool, {1, 0, 1});
  w.AddArray<int32_t>("a_empty", GgufType::kInt32, {});
  w.AddStringArray("a_str", {"a", "", "long string \xe2\x9c\x93"});
  // Array of arrays: [[1, 2], [], [3]] of int32, and [["x"], ["y", "z"]] of strings.
  const std::string nested_ints =
      GgufArrayBody(GgufType::kInt32, 2, GgufEnc<int32_t>(1) + GgufEnc<int32_t>(2)) +
      GgufArrayBody(GgufType::kInt32, 0, "") + GgufArrayBody(GgufType::kInt32, 1, GgufEnc<int32_t>(3));
  w.AddRaw("a_nested", GgufType::kArray, GgufArrayBody(GgufType::kArray, 3, nested_ints));
  const std::string nested_strs = GgufArrayBody(GgufType::kString, 1, GgufEncStr("x")) +
                                  GgufArrayBody(GgufType::kString, 2, GgufEncStr("y") + GgufEncStr("z"));
  w.AddRaw("a_nested_str", GgufType::kArray, GgufArrayBody(GgufType::kArray, 2, nested_strs));

  for (uint32_t version : {2u, 3u}) {
    const std::string path = TempPath("roundtrip");
    ASSERT_TRUE(GgufTestWriter::WriteFile(path, w.Serialize(version)));
    absl::StatusOr<GgufFile> f = GgufFile::Open(path);
    std::filesystem::remove(path);
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ(f->version(), version);
    EXPECT_EQ(f->metadata().size(), 30u);
    EXPECT_EQ(f->metadata()[0].first, "u8");
    EXPECT_EQ(*f->GetInt("u8"), 200);
    EXPECT_EQ(*f->GetInt("i8"), -100);
    EXPECT_EQ(*f->GetInt("u16"), 60000);
    EXPECT_EQ(*f->GetInt("i16"), -30000);
    EXPECT_EQ(*f->GetInt("u32"), 4000000000);
    EXPECT_EQ(*f->GetInt("i32"), -2000000000);
    EXPECT_EQ(*f->GetInt("u64"), int64_t{1} << 40);
    EXPECT_EQ(f->GetInt("u64_huge").status().code(), absl::StatusCode::kOutOfRange);
    EXPECT_HAS(std::string(f->GetInt("u64_huge").status().message()),
                ("9223372036854775813"));
    EXPECT_EQ(*f->GetInt("i64"), -(int64_t{1} << 62));
    EXPECT_EQ(*f->GetFloat("f32"), 1.5);
    EXPECT_EQ(*f->GetFloat("f64"), 3.141592653589793);
    EXPECT_EQ(*f->GetFloat("u16"), 60000.0);  // integers read as numbers too
    EXPECT_TRUE(*f->GetBool("yes"));
    EXPECT_FALSE(*f->GetBool("no"));
    EXPECT_EQ(*f->GetString("str"), std::string("h\xc3\xa9llo\0world", 12));
    EXPECT_EQ(*f->GetString("empty"), "");
    EXPECT_EQ(*f->GetIntArray("a_u8"), (std::vector<int64_t>{0, 255}));
    EXPECT_EQ(*f->GetIntArray("a_i8"), (std::vector<int64_t>{-128, 127}));
    EXPECT_EQ(*f->GetIntArray("a_u16"), (std::vector<int64_t>{1, 65535}));
    EXPECT_EQ(*f->GetIntArray("a_i16"), (std::vector<int64_t>{-32768, 7}));
    EXPECT_EQ(*f->GetIntArray("a_u32"), (std::vector<int64_t>{4294967295}));
    EXPECT_EQ(*f->GetIntArray("a_i32"), (std::vector<int64_t>{-1, 0, 1}));
    EXPECT_EQ(*f->GetIntArray("a_u64"), (std::vector<int64_t>{12345678901}));
    EXPECT_EQ(*f->GetIntArray("a_i64"),
              (std::vector<int64_t>{std::numeric_limits<int64_t>::min()}));
    EXPECT_EQ(*f->GetFloatArray("a_f32"), (std::vector<double>{0.25, -2.0}));
    EXPECT_EQ(*f->GetFloatArray("a_f64"), (std::vector<double>{1e300}));
    EXPECT_TRUE(f->GetIntArray("a_empty")->empty());
    EXPECT_EQ(*f->GetStringArray("a_str"),
              (std::vector<std::string>{"a", "", "long string \xe2\x9c\x93"}));

    absl::StatusOr<std::vector<GgufValue>> bools = f->GetArray("a_bool");
    ASSERT_TRUE(bools.ok());
    ASSERT_EQ(bools->size(), 3u);
    EXPECT_TRUE(*(*bools)[0].AsBool());
    EXPECT_FALSE(*(*bools)[1].AsBool());

    absl::StatusOr<std::vector<GgufValue>> nested = f->GetArray("a_nested");
    ASSERT_TRUE(nested.ok()) << nested.status();
    ASSERT_EQ(nested->size(), 3u);
    EXPECT_EQ((*nested)[0].type(), GgufType::kArray);
    EXPECT_EQ(*(*nested)[0].AsIntArray(), (std::vector<int64_t>{1, 2}));
    EXPECT_TRUE((*nested)[1].AsIntArray()->empty());
    EXPECT_EQ(*(*nested)[2].AsIntArray(), (std::vector<int64_t>{3}));
    absl::StatusOr<std::vector<GgufValue>> nested_s = f->GetArray("a_nested_str");
    ASSERT_TRUE(nested_s.ok());
    EXPECT_EQ(*(*nested_s)[0].AsStringArray(), (std::vector<std::string>{"x"}));
    EXPECT_EQ(*(*nested_s)[1].AsStringArray(), (std::vector<std::string>{"y", "z"}));
    EXPECT_TRUE(f->tensors().empty());
  }
}

TEST(GgufFile, TypedGettersNameKeyAndType) {
  GgufTestWriter w;
  w.AddU32("n", 7);
  w.AddStringArray("names", {"a"});
  absl::StatusOr<GgufFile> f = ParseBytes(w.Serialize());
  ASSERT_TRUE(f.ok()) << f.status();
  absl::Status s = f->GetString("n").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_HAS(std::string(s.message()), ("'n'"));
  EXPECT_HAS(std::string(s.message()), ("uint32"));
  s = f->GetIntArray("names").status();
  EXPECT_HAS(std::string(s.message()), ("array of string"));
  s = f->GetInt("absent.key").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_HAS(std::string(s.message()), ("absent.key"));
  s = f->Tensor("nope.weight").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_HAS(std::string(s.message()), ("nope.weight"));
}

TEST(GgufFile, TensorsRoundTripWithAlignment) {
  for (uint32_t align : {32u, 64u, 1u}) {
    GgufTestWriter w;
    w.SetAlignment(align);
    w.AddString("general.architecture", "llama");
    std::string f32;
    for (int i = 0; i < 6; ++i) f32 += GgufEnc<float>(static_cast<float>(i) * 0.5f);
    w.AddTensor("a", DType::kF32, {3, 2}, f32);
    w.AddTensor("q", DType::kQ8_0, {32, 2}, Q8Block(1.0f, -5) + Q8Block(0.5f, 10));
    absl::StatusOr<GgufFile> f = ParseBytes(w.Serialize());
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ(f->alignment(), align);
    EXPECT_EQ(f->data_offset() % align, 0u);
    ASSERT_EQ(f->tensors().size(), 2u);
    absl::StatusOr<GgufTensor> a = f->Tensor("a");
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->dtype, DType::kF32);
    EXPECT_EQ(a->shape, (std::vector<int64_t>{3, 2}));
    EXPECT_EQ(a->bytes, 24u);
    EXPECT_EQ(a->elements(), 6);
    EXPECT_EQ(std::memcmp(a->data, f32.data(), 24), 0);
    const GgufTensor* q = f->FindTensor("q");
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(q->dtype, DType::kQ8_0);
    EXPECT_EQ(q->bytes, 68u);
    EXPECT_EQ(q->offset % align, 0u);
    const int8_t* qs = static_cast<const int8_t*>(q->data) + 34 + 2;
    EXPECT_EQ(qs[0], 10);  // second row's first quant
  }
}

// ---- Broken files -------------------------------------------------------------------

// A small valid file with metadata of several kinds and two tensors.
GgufTestWriter ValidWriter() {
  GgufTestWriter w;
  w.AddString("general.architecture", "llama");
  w.AddU32("llama.block_count", 1);
  w.AddStringArray("tokenizer.ggml.tokens", {"a", "b", "c"});
  w.AddF32Tensor("x.weight", {4, 2}, 0.5f);
  w.AddTensor("q.weight", DType::kQ8_0, {32}, Q8Block(1.0f, 0));
  return w;
}

std::string ErrorOf(const std::string& bytes) {
  absl::StatusOr<GgufFile> f = ParseBytes(bytes);
  return f.ok() ? "OK" : std::string(f.status().message());
}

TEST(GgufFileBad, EveryTruncationIsAnErrorNotACrash) {
  const std::string good = ValidWriter().Serialize();
  ASSERT_TRUE(ParseBytes(good).ok());
  for (size_t n = 0; n < good.size(); ++n) {
    absl::StatusOr<GgufFile> f = ParseBytes(good.substr(0, n));
    ASSERT_FALSE(f.ok()) << "prefix of " << n << " bytes parsed";
    const std::string msg(f.status().message());
    EXPECT_TRUE(msg.find("truncated") != std::string::npos ||
                msg.find("past the end") != std::string::npos ||
                msg.find("remain") != std::string::npos ||
                msg.find("outside the file") != std::string::npos)
        << n << ": " << msg;
  }
  EXPECT_HAS(ErrorOf(good.substr(0, 10)), ("truncated GGUF file"));
  EXPECT_HAS(ErrorOf(good.substr(0, good.size() - 1)), ("'q.weight'"));
  EXPECT_HAS(ErrorOf(good.substr(0, good.size() - 1)), ("outside the file"));
}

TEST(GgufFileBad, WrongMagic) {
  std::string b = ValidWriter().Serialize();
  b.replace(0, 4, "GGML");
  EXPECT_HAS(ErrorOf(b), ("wrong magic 'GGML'"));
  EXPECT_HAS(ErrorOf(std::string("\x89PNG\r\n\x1a\n", 8) + std::string(40, '\0')),
              ("not a GGUF file"));
}

TEST(GgufFileBad, UnsupportedVersion) {
  EXPECT_HAS(ErrorOf(ValidWriter().Serialize(1)), ("unsupported GGUF version 1"));
  EXPECT_HAS(ErrorOf(ValidWriter().Serialize(4)), ("unsupported GGUF version 4"));
  EXPECT_HAS(ErrorOf(ValidWriter().Serialize(0x03000000)), ("big-endian"));
}

TEST(GgufFileBad, AbsurdCounts) {
  std::string b = ValidWriter().Serialize();
  std::string t = b;
  const uint64_t many = (uint64_t{1} << 20) + 1;
  std::memcpy(t.data() + 8, &many, 8);
  EXPECT_HAS(ErrorOf(t), ("absurd tensor count 1048577"));
  std::string k = b;
  const uint64_t huge = ~uint64_t{0};
  std::memcpy(k.data() + 16, &huge, 8);
  EXPECT_HAS(ErrorOf(k), ("absurd metadata count 18446744073709551615"));
}

TEST(GgufFileBad, StringLengthBeyondFile) {
  std::string b = ValidWriter().Serialize();
  // The first key's length is the first field after the 24-byte header.
  const uint64_t len = uint64_t{1} << 50;
  std::memcpy(b.data() + 24, &len, 8);
  const std::string msg = ErrorOf(b);
  EXPECT_HAS(msg, ("string length 1125899906842624"));
  EXPECT_HAS(msg, ("past the end of the file"));
  // A string value (not a key) too long.
  GgufTestWriter w;
  w.AddRaw("s", GgufType::kString, GgufEnc<uint64_t>(1000) + "short");
  EXPECT_HAS(ErrorOf(w.Serialize()), ("metadata 's': string length 1000"));
}

TEST(GgufFileBad, ArrayCountBeyondFile) {
  GgufTestWriter w;
  w.AddRaw("arr", GgufType::kArray, GgufArrayBody(GgufType::kUint32, uint64_t{1} << 61, ""));
  std::string msg = ErrorOf(w.Serialize());
  EXPECT_HAS(msg, ("metadata 'arr'"));
  EXPECT_HAS(msg, ("array of 2305843009213693952 uint32"));
  GgufTestWriter s;
  s.AddRaw("strs", GgufType::kArray, GgufArrayBody(GgufType::kString, 1000000, GgufEncStr("x")));
  EXPECT_HAS(ErrorOf(s.Serialize()), ("array of 1000000 string"));
}

TEST(GgufFileBad, UnknownTypesAndDeepNesting) {
  GgufTestWriter w;
  w.AddRaw("bad", static_cast<GgufType>(13), GgufEnc<uint32_t>(0));
  EXPECT_HAS(ErrorOf(w.Serialize()), ("metadata 'bad': unknown value type id 13"));
  GgufTestWriter a;
  a.AddRaw("bad", GgufType::kArray, GgufArrayBody(static_cast<GgufType>(99), 0, ""));
  EXPECT_HAS(ErrorOf(a.Serialize()), ("unknown array element type id 99"));
  std::string v = GgufArrayBody(GgufType::kInt32, 0, "");
  for (int i = 0; i < 20; ++i) v = GgufArrayBody(GgufType::kArray, 1, v);
  GgufTestWriter d;
  d.AddRaw("deep", GgufType::kArray, v);
  EXPECT_HAS(ErrorOf(d.Serialize()), ("nested deeper than"));
  GgufTestWriter dup;
  dup.AddU32("k", 1);
  dup.AddU32("k", 2);
  EXPECT_HAS(ErrorOf(dup.Serialize()), ("duplicate metadata 'k'"));
}

TEST(GgufFileBad, TensorDataOutsideFile) {
  GgufTestWriter w;
  w.AddF32Tensor("a", {8});
  w.AddTensor("far.weight", static_cast<uint32_t>(DType::kF32), {8}, "", 1 << 20);
  const std::string msg = ErrorOf(w.Serialize());
  EXPECT_HAS(msg, ("tensor 'far.weight'"));
  EXPECT_HAS(msg, ("offset 1048576, 32 bytes"));
  EXPECT_HAS(msg, ("outside the file"));
  // An offset so large that offset + bytes wraps around 2^64 must not pass.
  GgufTestWriter wrap;
  wrap.AddTensor("wrap", static_cast<uint32_t>(DType::kF32), {8}, "", ~int64_t{0} << 5 & INT64_MAX);
  EXPECT_HAS(ErrorOf(wrap.Serialize()), ("outside the file"));
}

TEST(GgufFileBad, UnsupportedTensorType) {
  GgufTestWriter w;
  w.AddTensor("blk.0.attn_q.weight", 6u, {32}, std::string(22, '\0'));
  const std::string msg = ErrorOf(w.Serialize());
  EXPECT_HAS(msg, ("'blk.0.attn_q.weight'"));
  EXPECT_HAS(msg, ("unsupported tensor type id 6 (Q5_0)"));
  GgufTestWriter u;
  u.AddTensor("t", 4242u, {32}, "");
  EXPECT_HAS(ErrorOf(u.Serialize()), ("unsupported tensor type id 4242"));
}

TEST(GgufFileBad, DimensionProblems) {
  GgufTestWriter overflow;
  overflow.AddTensor("big", static_cast<uint32_t>(DType::kF32), {uint64_t{1} << 40, uint64_t{1} << 40}, "");
  EXPECT_HAS(ErrorOf(overflow.Serialize()), ("overflow"));
  EXPECT_HAS(ErrorOf(overflow.Serialize()), ("'big'"));
  GgufTestWriter bytes_overflow;  // elements fit in 2^62 but bytes would not
  bytes_overflow.AddTensor("f32big", static_cast<uint32_t>(DType::kF32), {uint64_t{1} << 61}, "");
  EXPECT_HAS(ErrorOf(bytes_overflow.Serialize()), ("byte size overflow"));
  GgufTestWriter zero;
  zero.AddTensor("z", static_cast<uint32_t>(DType::kF32), {4, 0}, "");
  EXPECT_HAS(ErrorOf(zero.Serialize()), ("dimension 1 = 0 is zero"));
  GgufTestWriter dims;
  dims.AddTensor("five", static_cast<uint32_t>(DType::kF32), {1, 1, 1, 1, 1}, GgufEnc<float>(1));
  EXPECT_HAS(ErrorOf(dims.Serialize()), ("'five' has 5 dimensions"));
  GgufTestWriter block;
  block.AddTensor("odd", DType::kQ4_0, {48}, std::string(27, '\0'));
  EXPECT_HAS(ErrorOf(block.Serialize()), ("ne0 = 48 is not a multiple of the Q4_0 block size 32"));
}

TEST(GgufFileBad, AlignmentProblems) {
  GgufTestWriter w;
  w.AddU32("general.alignment", 24);
  EXPECT_HAS(ErrorOf(w.Serialize()), ("general.alignment = 24 is not a power of two"));
  GgufTestWriter s;
  s.AddString("general.alignment", "32");
  EXPECT_HAS(ErrorOf(s.Serialize()), ("general.alignment"));
  GgufTestWriter m;
  m.AddF32Tensor("a", {64});
  m.AddTensor("mis", static_cast<uint32_t>(DType::kF32), {1}, GgufEnc<float>(1), 4);
  EXPECT_HAS(ErrorOf(m.Serialize()), ("tensor 'mis' offset 4 is not a multiple of the alignment 32"));
  GgufTestWriter dup;
  dup.AddF32Tensor("t", {1});
  dup.AddF32Tensor("t", {1});
  EXPECT_HAS(ErrorOf(dup.Serialize()), ("duplicate tensor 't'"));
}

TEST(GgufFileBad, RandomCorruptionNeverCrashes) {
  const std::string good = ValidWriter().Serialize();
  std::mt19937 rng(42);
  int rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string b = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < flips; ++i) b[rng() % b.size()] = static_cast<char>(rng());
    absl::StatusOr<GgufFile> f = ParseBytes(b);
    if (!f.ok()) {
      ++rejected;
      EXPECT_FALSE(f.status().message().empty());
      continue;
    }
    // Whatever parsed must be readable without touching memory outside the file.
    for (const auto& [key, value] : f->metadata()) {
      (void)value.AsString();
      (void)value.AsArray();
      (void)value.AsStringArray();
    }
    for (const GgufTensor& t : f->tensors()) {
      ASSERT_NE(t.data, nullptr);
      EXPECT_LE(t.offset + t.bytes, f->file_size() - f->data_offset());
    }
  }
  EXPECT_GT(rejected, 0);
}

TEST(GgufFile, OpenReportsMissingAndEmptyFiles) {
  absl::StatusOr<GgufFile> f = GgufFile::Open("/nonexistent/dir/model.gguf");
  EXPECT_EQ(f.status().code(), absl::StatusCode::kNotFound);
  EXPECT_HAS(std::string(f.status().message()), ("/nonexistent/dir/model.gguf"));
  const std::string path = TempPath("empty");
  ASSERT_TRUE(GgufTestWriter::WriteFile(path, ""));
  f = GgufFile::Open(path);
  std::filesystem::remove(path);
  EXPECT_HAS(std::string(f.status().message()), ("truncated GGUF file"));
  f = GgufFile::Open(std::filesystem::temp_directory_path().string());
  EXPECT_HAS(std::string(f.status().message()), ("not a regular file"));
}

}  // namespace
}  // namespace kvserve
