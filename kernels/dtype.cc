// Block geometry of the GGML element types kvserve reads.
#include "kernels/dtype.h"

namespace kvserve {

int64_t BlockElements(DType t) {
  switch (t) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
      return 1;
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ8_0:
    case DType::kQ8_1:
      return 32;
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
      return 256;
  }
  return 0;
}

int64_t BlockBytes(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kQ4_0: return 2 + 16;        // d, 32 nibbles
    case DType::kQ4_1: return 2 + 2 + 16;    // d, m, 32 nibbles
    case DType::kQ8_0: return 2 + 32;        // d, 32 int8
    case DType::kQ8_1: return 2 + 2 + 32;    // d, s = d*sum(q), 32 int8
    case DType::kQ4_K: return 2 + 2 + 12 + 128;
    case DType::kQ5_K: return 2 + 2 + 12 + 32 + 128;
    case DType::kQ6_K: return 128 + 64 + 16 + 2;
  }
  return 0;
}

std::string_view DTypeName(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
    case DType::kQ4_0: return "Q4_0";
    case DType::kQ4_1: return "Q4_1";
    case DType::kQ8_0: return "Q8_0";
    case DType::kQ8_1: return "Q8_1";
    case DType::kQ4_K: return "Q4_K";
    case DType::kQ5_K: return "Q5_K";
    case DType::kQ6_K: return "Q6_K";
  }
  return "?";
}

bool IsSupportedWeightType(uint32_t id) {
  switch (static_cast<DType>(id)) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ8_0:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
      return true;
    default:
      return false;
  }
}

}  // namespace kvserve
