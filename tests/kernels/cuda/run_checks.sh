#!/usr/bin/env bash
# GPU checks for the CUDA backend, in one go on one GPU machine (H100/H200), < 8 minutes:
#   1. the binaries: from build-gpu-prebuilt/ when present (tests/kernels/cuda/prebuild.sh, run where the
#      Debian -dev packages are; the lent GPU machine has none and no network), else built here
#      for sm_90 into build-gpu/
#   2. kvserve_gpu_checks, one process per suite under a timeout (a CUDA error aborts its
#      process; the other suites still run): every CUDA op against the CPU reference (page sizes
#      16/32/64, head_dim 64/128, GQA 1..8, lengths 1..32K, bf16 and fp32 paths, errors per
#      sequence), greedy generation CPU vs CUDA on random:tiny and SmolLM2's shape, device
#      top-k candidates vs cpu::RowTopK; the KV compression kernels (SnapKV scores, value norms,
#      CriticalKV merge, top-k, compaction, weighted gather) against their CPU references; and
#      the continuous-batching scheduler with its KV pool on the GPU against the CPU scheduler
#   3. kvserve_gpu_bench: the timing table against ceilings measured in the same run (with
#      greedy and top-k sampling at batch 1 and 32, device vs logits to the host), and
#      end-to-end TTFT / decode tok/s on random:llama3-8b at 8K and 32K; then
#      kvserve_kv_compress_bench: scoring / selection / compaction ms at 32K and 128K for a
#      Llama-3.1-8B layer and their share of that layer's prefill (target < 5%)
#   4. if torch + transformers import: the same model shape in transformers (sdpa), ratios
# When nvidia-smi sees a GPU, KVSERVE_REQUIRE_GPU=1: a check that cannot use it fails instead of
# skipping. The whole log goes to $OUT/run_checks.log (or build-gpu.run_checks.log); a summary
# of every step is printed last.
# Usage: tests/kernels/cuda/run_checks.sh [--skip-e2e]   (env: BUILD_DIR, JOBS, CUDA_ARCHS, DEADLINE_S=540)
# Needs no network. Exit status: non-zero when the build, a check or a bench fails.
set -u
cd "$(dirname "$0")/../../.."  # the repository root (this file is tests/kernels/cuda/)
ROOT=$(pwd)
BUILD_DIR=${BUILD_DIR:-build-gpu}
JOBS=${JOBS:-$(nproc)}
CUDA_ARCHS=${CUDA_ARCHS:-90}
DEADLINE_S=${DEADLINE_S:-540}
SKIP_E2E=""
[ "${1:-}" = "--skip-e2e" ] && SKIP_E2E="--skip-e2e"
LOG=${OUT:+$OUT/run_checks.log}
LOG=${LOG:-$BUILD_DIR.run_checks.log}
exec > >(tee "$LOG") 2>&1
TEE_PID=$!
trap 'exec 1>&- 2>&-; wait $TEE_PID 2>/dev/null' EXIT  # the log's last lines are written before exit
start=$(date +%s)
stamp() { echo "== [$(($(date +%s) - start))s] $*"; }
SUMMARY=()
failed=0
# run_step NAME CAP_SECONDS CMD...: runs CMD under a timeout of CAP or what is left before the
# deadline (less 20 s for the summary), records "NAME rc seconds".
run_step() {
  local name=$1 cap=$2
  shift 2
  local left=$((DEADLINE_S - ($(date +%s) - start) - 20))
  local t=$((cap < left ? cap : left))
  if [ "$t" -lt 10 ]; then
    SUMMARY+=("$name: not run (deadline)")
    failed=1
    return
  fi
  stamp "$name (timeout ${t}s)"
  local s0=$(date +%s)
  timeout "$t" "$@"
  local rc=$?
  [ $rc -eq 124 ] && echo "$name: timed out after ${t}s"
  SUMMARY+=("$name: rc=$rc in $(($(date +%s) - s0))s")
  [ $rc -ne 0 ] && failed=1
  return 0
}

GPU_LINE=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null)
stamp "GPU: ${GPU_LINE:-nvidia-smi found no GPU}"
[ -n "$GPU_LINE" ] && export KVSERVE_REQUIRE_GPU=1
export PATH=/usr/local/cuda/bin:$PATH

# 1. The binaries.
PREBUILT=$ROOT/build-gpu-prebuilt
if [ -x "$PREBUILT/bin/kvserve_gpu_checks" ]; then
  BIN=$PREBUILT/bin
  stamp "prebuilt binaries: $(tr '\n' ';' <"$PREBUILT/SOURCE")"
  # The CUDA 13 runtime and cuBLASLt: the toolkit's folders, or the pip wheels' (PyTorch's).
  CUDA_LIBS=/usr/local/cuda/lib64:/usr/local/cuda/lib:/usr/local/cuda/targets/x86_64-linux/lib
  PIP_LIBS=$(python3 -c 'import glob, os, nvidia; print(":".join(sorted({os.path.dirname(p) for d in nvidia.__path__ for p in glob.glob(d + "/*/lib/lib*.so*")})))' 2>/dev/null)
  export LD_LIBRARY_PATH=$PREBUILT/lib:$CUDA_LIBS${PIP_LIBS:+:$PIP_LIBS}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  if ! "$BIN/kvserve_gpu_checks" --gtest_list_tests >/dev/null 2>"$BUILD_DIR.load.err"; then
    echo "the image's libraries do not load the binaries ($(head -c 300 "$BUILD_DIR.load.err")); adding lib-fallback"
    export LD_LIBRARY_PATH=$PREBUILT/lib:$PREBUILT/lib-fallback:$CUDA_LIBS${PIP_LIBS:+:$PIP_LIBS}
  fi
  if ! "$BIN/kvserve_gpu_checks" --gtest_list_tests >/dev/null 2>"$BUILD_DIR.load.err"; then
    cat "$BUILD_DIR.load.err"
    echo "prebuilt binaries do not load here"
    exit 1
  fi
else
  command -v nvcc >/dev/null || { echo "nvcc not found (install the CUDA toolkit)"; exit 1; }
  stamp "configure ($BUILD_DIR, sm_$CUDA_ARCHS)"
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVSERVE_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCHS" -DKVSERVE_CUDA_ARCHS="${CUDA_ARCHS}-real" >"$BUILD_DIR.configure.log" 2>&1 \
    || { tail -30 "$BUILD_DIR.configure.log"; echo "configure failed (no Debian -dev packages here? run tests/kernels/cuda/prebuild.sh where they are and carry build-gpu-prebuilt)"; exit 1; }
  stamp "build"
  ninja -C "$BUILD_DIR" -j"$JOBS" kvserve_gpu_checks kvserve_gpu_bench kvserve_kv_compress_bench >"$BUILD_DIR.build.log" 2>&1 \
    || { grep -B2 -A20 -m3 'error' "$BUILD_DIR.build.log" | head -80; echo "build failed"; exit 1; }
  BIN=$BUILD_DIR/tests/kernels/cuda
fi

# 2. Correctness, one process per suite. SmolLM2's file comes from models/ when present (its
# tests skip without it; random-weight tests of the same shape always run).
export KVSERVE_SMOLLM2_GGUF=${KVSERVE_SMOLLM2_GGUF:-$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf}
for suite in $("$BIN/kvserve_gpu_checks" --gtest_list_tests | grep -E '^[A-Za-z_][A-Za-z0-9_]*\.$' | tr -d '.'); do
  run_step "checks $suite" 150 "$BIN/kvserve_gpu_checks" --gtest_filter="$suite.*" --gtest_brief=1
done

# 3. Timings (the table) and the end-to-end numbers for the peer.
E2E_JSON=${OUT:-$BUILD_DIR}/kvserve_e2e.json
rm -f "$E2E_JSON"
run_step "bench kvserve_gpu_bench" 240 "$BIN/kvserve_gpu_bench" --e2e-json "$E2E_JSON" $SKIP_E2E
run_step "bench kvserve_kv_compress_bench" 90 "$BIN/kvserve_kv_compress_bench"

# 4. The transformers peer, when it is installed on this machine.
if [ -z "$SKIP_E2E" ] && [ -s "$E2E_JSON" ] && python3 -c 'import torch, transformers' 2>/dev/null; then
  run_step "peer transformers+sdpa" 150 env HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 python3 tests/kernels/cuda/hf_peer.py --kvserve "$E2E_JSON"
else
  SUMMARY+=("peer transformers+sdpa: skipped (torch/transformers not importable, no e2e figures, or --skip-e2e)")
fi

stamp "summary"
for line in "${SUMMARY[@]}"; do echo "  $line"; done
echo "log: $LOG"
exit $failed
