// libFuzzer target for the safetensors parser: any file must either open or return a
// Status, and whatever opens must be fully readable (every tensor found by name and, when
// small, widened to float) without touching memory outside the file. The parser maps a
// path, so each input is written to an in-memory file (memfd) first.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "engine/model/safetensors_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = memfd_create("safetensors_fuzz", MFD_CLOEXEC);
  if (fd < 0) std::abort();
  size_t written = 0;
  while (written < size) {
    const ssize_t n = write(fd, data + written, size - written);
    if (n <= 0) std::abort();
    written += static_cast<size_t>(n);
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  absl::StatusOr<std::shared_ptr<const kvserve::SafetensorsFile>> f = kvserve::SafetensorsFile::Open(path);
  close(fd);  // the mapping, if any, stays valid
  if (!f.ok()) return 0;
  for (const kvserve::SafetensorsTensor& t : (*f)->tensors()) {
    if ((*f)->Find(t.name) != &t) std::abort();  // names are unique and sorted
    if (t.NumElements() > (1 << 16)) continue;   // keep the scratch small
    const std::vector<float> v = kvserve::TensorToF32(t);
    if (static_cast<int64_t>(v.size()) != t.NumElements()) std::abort();
  }
  return 0;
}
