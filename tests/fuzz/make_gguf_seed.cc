// Writes the seed corpus for gguf_fuzz: small valid GGUFs (v2 and v3) with metadata of
// every type and one tensor of every supported type, so mutations start from real files.
#include <cstdio>
#include <string>

#include "tests/engine/model/gguf_test_writer.h"

using kvserve::DType;
using kvserve::GgufType;
using kvserve::testing::GgufArrayBody;
using kvserve::testing::GgufEnc;
using kvserve::testing::GgufEncStr;
using kvserve::testing::GgufTestWriter;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  GgufTestWriter w;
  w.AddString("general.architecture", "llama");
  w.Add<uint8_t>("u8", GgufType::kUint8, 1);
  w.Add<int8_t>("i8", GgufType::kInt8, -1);
  w.Add<uint16_t>("u16", GgufType::kUint16, 2);
  w.Add<int16_t>("i16", GgufType::kInt16, -2);
  w.AddU32("llama.block_count", 1);
  w.AddI32("i32", -3);
  w.Add<uint64_t>("u64", GgufType::kUint64, 4);
  w.Add<int64_t>("i64", GgufType::kInt64, -4);
  w.AddF32("f32", 0.5f);
  w.Add<double>("f64", GgufType::kFloat64, 0.25);
  w.AddBool("b", true);
  w.AddStringArray("tokenizer.ggml.tokens", {"a", "bc", ""});
  w.AddArray<float>("scores", GgufType::kFloat32, {1, 2, 3});
  w.AddRaw("nested", GgufType::kArray,
           GgufArrayBody(GgufType::kArray, 2,
                         GgufArrayBody(GgufType::kInt32, 1, GgufEnc<int32_t>(7)) +
                             GgufArrayBody(GgufType::kString, 1, GgufEncStr("s"))));
  const DType types[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ4_0, DType::kQ4_1,
                         DType::kQ8_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};
  for (DType t : types) {
    const uint64_t n = static_cast<uint64_t>(kvserve::BlockElements(t) == 1 ? 8 : kvserve::BlockElements(t));
    std::string bytes(static_cast<size_t>(kvserve::RowBytes(t, static_cast<int64_t>(n))), '\x11');
    w.AddTensor(std::string("t_") + std::string(kvserve::DTypeName(t)), t, {n, 1}, bytes);
  }
  bool ok = true;
  ok &= GgufTestWriter::WriteFile(dir + "/seed_v3.gguf", w.Serialize(3));
  ok &= GgufTestWriter::WriteFile(dir + "/seed_v2.gguf", w.Serialize(2));
  GgufTestWriter aligned;
  aligned.SetAlignment(64);
  aligned.AddF32Tensor("x", {4, 2});
  ok &= GgufTestWriter::WriteFile(dir + "/seed_align.gguf", aligned.Serialize());
  if (!ok) {
    std::fprintf(stderr, "make_gguf_seed: cannot write to %s\n", dir.c_str());
    return 1;
  }
  return 0;
}
