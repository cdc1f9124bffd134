// Backend selection for --device. CUDA is compiled in only when the kvserve binary links
// kvserve_cuda (which defines KVSERVE_HAVE_CUDA).
#include "server/serve/device_backend.h"

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/generator.h"

#ifdef KVSERVE_HAVE_CUDA
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_device.h"
#endif

namespace kvserve {

absl::StatusOr<std::unique_ptr<Backend>> MakeBackendForDevice(std::string_view device, Determinism determinism) {
  if (determinism == Determinism::kBatchInvariant) {
    if (device == "cuda") return absl::FailedPreconditionError("--deterministic runs on the CPU backend only, got --device cuda");
    if (device == "cpu" || device == "auto") return MakeCpuBackend(determinism);
  }
  if (device == "cpu") return MakeCpuBackend();
  if (device != "auto" && device != "cuda") {
    return absl::InvalidArgumentError(absl::StrCat("--device must be auto, cpu or cuda, got '", std::string(device), "'"));
  }
#ifdef KVSERVE_HAVE_CUDA
  std::string why;
  if (CudaDeviceCount(&why) > 0) return MakeCudaBackend(0);
  const std::string reason = absl::StrCat("no CUDA device (", why, ")");
#else
  const std::string reason = "this kvserve was built without CUDA (configure with -DKVSERVE_CUDA=ON)";
#endif
  if (device == "cuda") return absl::FailedPreconditionError(absl::StrCat("--device cuda: ", reason));
  std::fprintf(stderr, "kvserve: --device auto: %s; using the CPU backend\n", reason.c_str());
  return MakeCpuBackend();
}

absl::Status UploadWeights(const Model& model, const Tokenizer& tokenizer, Backend& backend) {
  if (backend.HostMemory()) return absl::OkStatus();
  // One token, one step: every layer's weights and the output head go through the backend.
  // (Activation scratch for the engine's larger steps still grows later, outside the pool.)
  GenerationOptions o;
  o.max_new_tokens = 1;
  o.ignore_eos = true;
  const int32_t token = 0;
  absl::StatusOr<GenerationResult> r = Generate(model, tokenizer, backend, absl::MakeConstSpan(&token, 1), o);
  return r.ok() ? absl::OkStatus() : r.status();
}

}  // namespace kvserve
