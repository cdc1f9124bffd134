#!/usr/bin/env bash
# Builds the GGUF parser fuzzer with clang (libFuzzer + ASan + UBSan) and runs it for a
# bounded time on a generated seed corpus. Usage: run_gguf_fuzz.sh OUT_DIR [seconds].
# A missing clang is an error, not a skip: scripts/setup.sh installs it.
set -euo pipefail
out=${1:?usage: run_gguf_fuzz.sh OUT_DIR [seconds]}
secs=${2:-${GGUF_FUZZ_SECONDS:-20}}
root=$(cd "$(dirname "$0")/../.." && pwd)
cxx=${FUZZ_CXX:-clang++}
if ! command -v "$cxx" >/dev/null; then
  echo "run_gguf_fuzz: $cxx not found; install clang and libclang-rt-dev (scripts/setup.sh)" >&2
  exit 1
fi
absl_libs=$(pkg-config --libs absl_status absl_statusor absl_strings absl_str_format)
mkdir -p "$out/corpus" "$out/seeds"
srcs=("$root/tests/fuzz/gguf_fuzz.cc" "$root/engine/model/gguf_file.cc"
      "$root/kernels/cpu/dequantize.cc" "$root/kernels/dtype.cc")
deps=("${srcs[@]}" "$root/engine/model/gguf_file.h" "$root/kernels/cpu/dequantize.h"
      "$root/kernels/cpu/half.h" "$root/kernels/dtype.h")
# Rebuild only when a source is newer than the binary (ctest runs this every time).
rebuild=0
[ -x "$out/gguf_fuzz" ] || rebuild=1
for f in "${deps[@]}"; do [ "$f" -nt "$out/gguf_fuzz" ] && rebuild=1; done
if [ "$rebuild" = 1 ]; then
  "$cxx" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$root" "${srcs[@]}" $absl_libs -o "$out/gguf_fuzz"
  "$cxx" -std=c++20 -O1 -I"$root" "$root/tests/fuzz/make_gguf_seed.cc" "$root/kernels/dtype.cc" \
    -o "$out/make_gguf_seed"
fi
"$out/make_gguf_seed" "$out/seeds"
# New inputs go to corpus/ (kept between runs); seeds/ is read-only input.
"$out/gguf_fuzz" -max_total_time="$secs" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 "$out/corpus" "$out/seeds"
