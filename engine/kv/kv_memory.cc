// --kv-memory parsing, /proc/meminfo, and peak-page arithmetic for admission.
#include "engine/kv/kv_memory.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kvserve {

absl::StatusOr<int64_t> ParseKvMemory(std::string_view spec_view, int64_t available_bytes) {
  const std::string spec(spec_view);
  auto bad = [&](const char* why) {
    return absl::InvalidArgumentError(absl::StrCat("--kv-memory '", spec, "' ", why,
                                                   " (want bytes like 512M or 2G, or a fraction like 0.5)"));
  };
  std::string num = spec;
  // Strip an optional B / iB so 512MB and 512MiB read like 512M.
  if (!num.empty() && (num.back() == 'B' || num.back() == 'b')) num.pop_back();
  if (!num.empty() && (num.back() == 'i' || num.back() == 'I')) num.pop_back();
  double scale = 1;
  if (!num.empty() && std::isalpha(static_cast<unsigned char>(num.back()))) {
    switch (std::toupper(static_cast<unsigned char>(num.back()))) {
      case 'K': scale = 1024.0; break;
      case 'M': scale = 1024.0 * 1024; break;
      case 'G': scale = 1024.0 * 1024 * 1024; break;
      case 'T': scale = 1024.0 * 1024 * 1024 * 1024; break;
      default: return bad("has an unknown unit");
    }
    num.pop_back();
  }
  double value;
  if (num.empty() || !absl::SimpleAtod(num, &value) || !std::isfinite(value)) return bad("is not a number");
  if (value <= 0) return bad("must be positive");
  const bool fraction = scale == 1 && value <= 1 && num.find('.') != std::string::npos;
  if (fraction) {
    if (available_bytes <= 0) return bad("is a fraction but available memory is unknown");
    return static_cast<int64_t>(value * static_cast<double>(available_bytes));
  }
  const double bytes = value * scale;
  if (bytes >= 9.0e18) return bad("is too large");
  return static_cast<int64_t>(bytes);
}

absl::StatusOr<int64_t> AvailableMemoryBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  int64_t kb;
  while (in >> key >> kb) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return kb * 1024;
  }
  return absl::UnavailableError("/proc/meminfo has no MemAvailable line");
}

absl::StatusOr<int64_t> PagesForBytes(int64_t bytes, const PagePoolShape& shape) {
  const int64_t page = PagePool::PageBytes(shape);
  if (page <= 0) return absl::InvalidArgumentError(absl::StrCat("KV page size is ", page, " bytes"));
  const int64_t pages = bytes / page;
  if (pages < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--kv-memory of ", bytes, " bytes holds no KV page (one page is ",
                                                   page, " bytes)"));
  }
  // Page indices are int32 in the kernels' views.
  return std::min<int64_t>(pages, INT32_MAX);
}

int64_t PeakPagesForRequest(int64_t prompt_tokens, int64_t max_new_tokens, int64_t page_size, int64_t n_layers,
                            absl::Span<const int64_t> layer_quota) {
  const int64_t full = prompt_tokens + max_new_tokens;
  int64_t pages = 0;
  for (int64_t l = 0; l < n_layers; ++l) {
    const bool quota = l < static_cast<int64_t>(layer_quota.size());
    const int64_t slots = quota ? std::min(full, std::max<int64_t>(0, layer_quota[l])) : full;
    pages += (slots + page_size - 1) / page_size;
  }
  return pages;
}

absl::StatusOr<int64_t> KvMemoryBytes(std::string_view spec, Backend& backend) {
  int64_t available = 0;  // unknown: a fraction is then refused by ParseKvMemory
  if (backend.HostMemory()) {
    absl::StatusOr<int64_t> host = AvailableMemoryBytes();
    if (host.ok()) available = *host;
  } else {
    available = std::max<int64_t>(backend.FreeMemoryBytes(), 0);
  }
  absl::StatusOr<int64_t> bytes = ParseKvMemory(spec, available);
  // A device allocation that does not fit aborts inside the backend; say so here instead.
  if (bytes.ok() && !backend.HostMemory() && *bytes > available) {
    return absl::ResourceExhaustedError(absl::StrCat("--kv-memory ", std::string(spec), " (", *bytes,
                                                     " bytes) is more than the ", available, " bytes free on the ",
                                                     std::string(backend.Name()), " device"));
  }
  return bytes;
}

}  // namespace kvserve
