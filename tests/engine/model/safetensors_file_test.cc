// SafetensorsFile: parsing, data views, and the errors for malformed files.
#include "engine/model/safetensors_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace kvserve {
namespace {

// Writes <u64 header length><header><data> to a fresh temp file and returns its path.
std::string WriteFile(const std::string& name, const std::string& header, const std::string& data,
                      int64_t header_len_override = -1) {
  std::string path = (std::filesystem::temp_directory_path() /
                      ("kvserve_st_" + std::to_string(::getpid()) + "_" + name + ".safetensors"))
                         .string();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  uint64_t n = header_len_override >= 0 ? static_cast<uint64_t>(header_len_override) : header.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((n >> (8 * i)) & 0xff));
  out << header << data;
  return path;
}

std::string Floats(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

TEST(SafetensorsFileTest, ParsesTensorsAndData) {
  // bf16 1.0 = 0x3f80, -2.0 = 0xc000; f16 1.5 = 0x3e00, -0.25 = 0xb400.
  const std::string data = Floats({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}) +
                           std::string("\x80\x3f\x00\xc0", 4) + std::string("\x00\x3e\x00\xb4", 4);
  const std::string header =
      R"({"__metadata__":{"format":"pt"},)"
      R"("w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
      R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[24,28]},)"
      R"("h":{"dtype":"F16","shape":[2],"data_offsets":[28,32]}})";
  auto f = SafetensorsFile::Open(WriteFile("ok", header, data));
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ((*f)->tensors().size(), 3u);
  const SafetensorsTensor* w = (*f)->Find("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype, DType::kF32);
  EXPECT_EQ(w->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(w->nbytes, 24);
  EXPECT_EQ(w->NumElements(), 6);
  EXPECT_EQ(TensorToF32(*w), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  const SafetensorsTensor* b = (*f)->Find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, DType::kBF16);
  EXPECT_EQ(TensorToF32(*b), (std::vector<float>{1.0f, -2.0f}));
  const SafetensorsTensor* h = (*f)->Find("h");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->dtype, DType::kF16);
  EXPECT_EQ(TensorToF32(*h), (std::vector<float>{1.5f, -0.25f}));
  EXPECT_EQ((*f)->Find("__metadata__"), nullptr);
  EXPECT_EQ((*f)->Find("missing"), nullptr);
}

TEST(SafetensorsFileTest, HalfConversions) {
  EXPECT_EQ(F16ToF32(0x3c00), 1.0f);
  EXPECT_EQ(F16ToF32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(F16ToF32(0x7bff), 65504.0f);
  EXPECT_TRUE(std::isinf(F16ToF32(0xfc00)));
  EXPECT_EQ(Bf16ToF32(F32ToBf16(3.140625f)), 3.140625f);  // exactly representable
  EXPECT_EQ(F32ToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // tie rounds to even
  EXPECT_EQ(F32ToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
}

TEST(SafetensorsFileTest, TooShortFile) {
  std::string path = WriteFile("short", "", "");
  std::filesystem::resize_file(path, 4);
  auto f = SafetensorsFile::Open(path);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("too short"), std::string::npos) << f.status();
}

TEST(SafetensorsFileTest, HeaderLengthBeyondFile) {
  auto f = SafetensorsFile::Open(WriteFile("hlen", "{}", "", /*header_len_override=*/1000));
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("header length 1000"), std::string::npos) << f.status();
}

TEST(SafetensorsFileTest, BadJson) {
  auto f = SafetensorsFile::Open(WriteFile("json", "{\"w\": [", ""));
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(f.status().message().find("not a valid JSON"), std::string::npos) << f.status();
}

TEST(SafetensorsFileTest, UnsupportedDtypeIsNamed) {
  auto f = SafetensorsFile::Open(
      WriteFile("dtype", R"({"ids":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", std::string(8, '\0')));
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("'I64'"), std::string::npos) << f.status();
  EXPECT_NE(f.status().message().find("'ids'"), std::string::npos) << f.status();
}

TEST(SafetensorsFileTest, OffsetsOutsideFile) {
  auto f = SafetensorsFile::Open(
      WriteFile("range", R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", Floats({1, 2})));
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("outside the data section of 8 bytes"), std::string::npos)
      << f.status();
}

TEST(SafetensorsFileTest, OffsetsMismatchShape) {
  auto f = SafetensorsFile::Open(
      WriteFile("size", R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", Floats({1, 2})));
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("span 8 bytes but shape x F32 needs 12"), std::string::npos)
      << f.status();
}

TEST(SafetensorsFileTest, OverlappingTensors) {
  auto f = SafetensorsFile::Open(WriteFile(
      "overlap",
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
      Floats({1, 2, 3})));
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("overlap"), std::string::npos) << f.status();
  EXPECT_NE(f.status().message().find("'a'"), std::string::npos) << f.status();
  EXPECT_NE(f.status().message().find("'b'"), std::string::npos) << f.status();
}

TEST(SafetensorsFileTest, MissingFile) {
  auto f = SafetensorsFile::Open("/nonexistent/model.safetensors");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(f.status().message().find("/nonexistent/model.safetensors"), std::string::npos);
}

}  // namespace
}  // namespace kvserve
