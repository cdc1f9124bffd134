#!/usr/bin/env bash
# Builds the GPU check binaries on this (GPU-less) machine and packs them into
# build-gpu-prebuilt/ with the shared libraries a GPU machine's image may lack.
#
# Why: the lent GPU machine has the CUDA toolkit (13.0, as here), CMake and ninja, but none of
# the Debian -dev packages kvserve configures against (OpenBLAS, abseil, GoogleTest, PCRE2, ...)
# and no network, so tests/kernels/cuda/run_checks.sh cannot build there. It runs these binaries instead
# when build-gpu-prebuilt/ is present; carry that folder (git-ignored, ~45 MB) with the run.
#
#   bin/           kvserve_gpu_checks, kvserve_gpu_bench, kvserve_kv_compress_bench (stripped)
#   lib/           their non-system libraries (OpenBLAS, abseil, PCRE2, libgomp, gfortran, ...)
#   lib-fallback/  libstdc++ and libgcc_s, used only if the image's own are too old
#   SOURCE         the commit and whether the tree had changes, printed by run_checks.sh
# The C library and the CUDA libraries (cudart, cuBLASLt) come from the GPU machine itself.
# Usage: tests/kernels/cuda/prebuild.sh   (env: BUILD_DIR=build-gpu, CUDA_ARCHS=90, JOBS)
set -euo pipefail
cd "$(dirname "$0")/../../.."  # the repository root (this file is tests/kernels/cuda/)
BUILD_DIR=${BUILD_DIR:-build-gpu}
CUDA_ARCHS=${CUDA_ARCHS:-90}
JOBS=${JOBS:-$(nproc)}
PACK=build-gpu-prebuilt
BINS=(kvserve_gpu_checks kvserve_gpu_bench kvserve_kv_compress_bench)
export PATH=/usr/local/cuda/bin:$PATH

cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVSERVE_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCHS" -DKVSERVE_CUDA_ARCHS="${CUDA_ARCHS}-real" >/dev/null
ninja -C "$BUILD_DIR" -j"$JOBS" "${BINS[@]}"

rm -rf "$PACK"
mkdir -p "$PACK/bin" "$PACK/lib" "$PACK/lib-fallback"
for b in "${BINS[@]}"; do
  cp "$BUILD_DIR/tests/kernels/cuda/$b" "$PACK/bin/"
  strip "$PACK/bin/$b"
done
ldd "$PACK"/bin/* | awk '/=> \// {print $3}' | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | librt.so.* | ld-linux*) ;;  # the image's C library
    libcuda.so.* | libcudart.so.* | libcublas*.so.*) ;;  # the image's CUDA 13 toolkit and driver
    libstdc++.so.* | libgcc_s.so.*) cp -L "$lib" "$PACK/lib-fallback/" ;;
    *) cp -L "$lib" "$PACK/lib/" ;;
  esac
done
{
  echo "commit $(git rev-parse --short HEAD)"
  echo "uncommitted changes: $(git status --porcelain --untracked-files=no | wc -l) files"
  echo "built $(date -u +%FT%TZ) for sm_$CUDA_ARCHS"
} >"$PACK/SOURCE"
du -sh "$PACK"
cat "$PACK/SOURCE"
