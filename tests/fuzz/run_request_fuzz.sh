#!/usr/bin/env bash
# Builds the request-path fuzzer (tests/fuzz/request_fuzz.cc) in a clang build of its own,
# every source with libFuzzer coverage + ASan + UBSan and without CUDA, and runs it for a
# bounded time on seeds made by make_request_seeds.py. Usage: run_request_fuzz.sh OUT_DIR
# [seconds]. The first build compiles the engine and server libraries again (minutes); later
# runs rebuild what changed. A missing clang is an error, not a skip (scripts/setup.sh).
set -euo pipefail
out=${1:?usage: run_request_fuzz.sh OUT_DIR [seconds]}
secs=${2:-${REQUEST_FUZZ_SECONDS:-30}}
root=$(cd "$(dirname "$0")/../.." && pwd)
cc=${FUZZ_CC:-clang}
cxx=${FUZZ_CXX:-clang++}
if ! command -v "$cxx" >/dev/null; then
  echo "run_request_fuzz: $cxx not found; install clang, libclang-rt-dev and libomp-dev (scripts/setup.sh)" >&2
  exit 1
fi
build="$out/request_build"
generator=()
command -v ninja >/dev/null && [ ! -f "$build/CMakeCache.txt" ] && generator=(-G Ninja)
# clang reports what GCC does not (an OpenMP simd loop it leaves scalar under the sanitizers):
# those warnings are off here, since the project builds with -Werror.
flags="-O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -Wno-pass-failed"
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Fuzz -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_CXX_FLAGS_FUZZ="$flags" -DCMAKE_C_FLAGS_FUZZ="$flags" \
  -DKVSERVE_CUDA=OFF -DKVSERVE_FUZZ=ON >/dev/null
# Niced: under ctest -j it shares the cores with timing-sensitive tests.
nice -n 10 cmake --build "$build" --target request_fuzz -j "${FUZZ_JOBS:-$(nproc)}"
mkdir -p "$out/request_corpus" "$out/request_seeds"
python3 "$root/tests/fuzz/make_request_seeds.py" "$out/request_seeds"
# One OpenMP thread: the fuzzer runs one input at a time, and thread start-up would dominate.
OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "$build/tests/fuzz/request_fuzz" -max_total_time="$secs" \
  -max_len=4096 -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 "$out/request_corpus" "$out/request_seeds"
