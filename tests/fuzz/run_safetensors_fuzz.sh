#!/usr/bin/env bash
# Builds the safetensors parser fuzzer with clang (libFuzzer + ASan + UBSan) and runs it for a
# bounded time on a few valid seed files. Usage: run_safetensors_fuzz.sh OUT_DIR [seconds].
# A missing clang is an error, not a skip: scripts/setup.sh installs it.
set -euo pipefail
out=${1:?usage: run_safetensors_fuzz.sh OUT_DIR [seconds]}
secs=${2:-${SAFETENSORS_FUZZ_SECONDS:-20}}
root=$(cd "$(dirname "$0")/../.." && pwd)
cxx=${FUZZ_CXX:-clang++}
if ! command -v "$cxx" >/dev/null; then
  echo "run_safetensors_fuzz: $cxx not found; install clang and libclang-rt-dev (scripts/setup.sh)" >&2
  exit 1
fi
absl_libs=$(pkg-config --libs absl_status absl_statusor absl_strings absl_str_format)
mkdir -p "$out/st_corpus" "$out/st_seeds"
srcs=("$root/tests/fuzz/safetensors_fuzz.cc" "$root/engine/model/safetensors_file.cc" "$root/kernels/dtype.cc")
deps=("${srcs[@]}" "$root/engine/model/safetensors_file.h" "$root/kernels/dtype.h")
rebuild=0
[ -x "$out/safetensors_fuzz" ] || rebuild=1
for f in "${deps[@]}"; do [ "$f" -nt "$out/safetensors_fuzz" ] && rebuild=1; done
if [ "$rebuild" = 1 ]; then
  "$cxx" -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -I"$root" "${srcs[@]}" $absl_libs -o "$out/safetensors_fuzz"
fi
# Seeds: valid files of each dtype, one with two tensors and metadata, one empty.
python3 - "$out/st_seeds" <<'PY'
import json, struct, sys, os
def write(name, tensors, meta=None):
    header, blob = {}, b""
    for tname, (dtype, shape, data) in tensors.items():
        header[tname] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    if meta: header["__metadata__"] = meta
    h = json.dumps(header).encode()
    with open(os.path.join(sys.argv[1], name), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + blob)
write("f32", {"w": ("F32", [2, 3], struct.pack("<6f", *range(6)))})
write("f16_bf16", {"a": ("F16", [4], b"\x00\x3c" * 4), "b": ("BF16", [2, 2], b"\x80\x3f" * 4)},
      {"format": "pt"})
write("empty", {})
PY
"$out/safetensors_fuzz" -max_total_time="$secs" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 "$out/st_corpus" "$out/st_seeds"
