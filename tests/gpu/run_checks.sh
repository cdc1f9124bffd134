#!/usr/bin/env bash
# GPU checks for the CUDA backend, in one go on one GPU machine (H100/H200), < 8 minutes:
#   1. build kvserve's CUDA backend for sm_90 only (fast) into build-gpu/
#   2. kvserve_gpu_checks: every CUDA op against the CPU reference (page sizes 16/32/64,
#      head_dim 64/128, GQA 1/4/8, lengths 1..32K, bf16 and fp32 paths) and greedy
#      generation CPU vs CUDA on random:tiny and SmolLM2 (skipped with a line if the model
#      file is absent), device top-k candidates vs cpu::RowTopK; and the KV compression kernels (SnapKV scores, value norms, CriticalKV merge, top-k,
#      compaction, weighted gather) against their CPU references, kept sets equal but for ties;
#      and the continuous-batching scheduler with its KV pool on the GPU (40 concurrent requests,
#      full cache and SnapKV/CriticalKV at chunk and prefill_end) against the CPU scheduler
#   3. kvserve_gpu_bench: the timing table against ceilings measured in the same run (with
#      greedy and top-k sampling at batch 1 and 32, device vs logits to the host), and
#      end-to-end TTFT / decode tok/s on random:llama3-8b at 8K and 32K; then
#      kvserve_kv_compress_bench: scoring / selection / compaction ms at 32K and 128K for a
#      Llama-3.1-8B layer and their share of that layer's prefill (target < 5%)
#   4. if torch + transformers import: the same model shape in transformers (sdpa), ratios
# Usage: tests/gpu/run_checks.sh [--skip-e2e]   (env: BUILD_DIR, JOBS, CUDA_ARCHS)
# Needs no network. Exit status: non-zero when the build or a correctness check fails.
set -u
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
BUILD_DIR=${BUILD_DIR:-build-gpu}
JOBS=${JOBS:-$(nproc)}
CUDA_ARCHS=${CUDA_ARCHS:-90}
SKIP_E2E=""
[ "${1:-}" = "--skip-e2e" ] && SKIP_E2E="--skip-e2e"
start=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - start ))s] $*"; }

stamp "GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo 'nvidia-smi not found')"
export PATH=/usr/local/cuda/bin:$PATH
command -v nvcc >/dev/null || { echo "nvcc not found (install the CUDA toolkit)"; exit 1; }

# 1. Build: only the two GPU binaries and what they need (not the gRPC server).
stamp "configure ($BUILD_DIR, sm_$CUDA_ARCHS)"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVSERVE_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCHS" -DKVSERVE_CUDA_ARCHS="${CUDA_ARCHS}-real" >"$BUILD_DIR.configure.log" 2>&1 \
  || { tail -30 "$BUILD_DIR.configure.log"; echo "configure failed"; exit 1; }
stamp "build"
ninja -C "$BUILD_DIR" -j"$JOBS" kvserve_gpu_checks kvserve_gpu_bench kvserve_kv_compress_bench >"$BUILD_DIR.build.log" 2>&1 \
  || { grep -B2 -A20 -m3 'error' "$BUILD_DIR.build.log" | head -80; echo "build failed"; exit 1; }

# 2. Correctness. SmolLM2 comes from models/ (scripts/fetch-model.sh); absent: that test skips.
export KVSERVE_SMOLLM2_GGUF=${KVSERVE_SMOLLM2_GGUF:-$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf}
[ -f "$KVSERVE_SMOLLM2_GGUF" ] || echo "SmolLM2 model not found at $KVSERVE_SMOLLM2_GGUF: its greedy comparison skips"
stamp "correctness: kvserve_gpu_checks"
"$BUILD_DIR/tests/gpu/kvserve_gpu_checks" --gtest_brief=0
checks_rc=$?

# 3. Timings (the table) and the end-to-end numbers for the peer.
stamp "timings: kvserve_gpu_bench"
E2E_JSON="$BUILD_DIR/kvserve_e2e.json"
rm -f "$E2E_JSON"
timeout 300 "$BUILD_DIR/tests/gpu/kvserve_gpu_bench" --e2e-json "$E2E_JSON" $SKIP_E2E
bench_rc=$?
stamp "timings: kvserve_kv_compress_bench"
timeout 120 "$BUILD_DIR/tests/gpu/kvserve_kv_compress_bench" || bench_rc=1

# 4. The transformers peer, when it is installed on this machine.
if [ -z "$SKIP_E2E" ] && python3 -c 'import torch, transformers' 2>/dev/null; then
  stamp "peer: transformers + sdpa"
  timeout 180 python3 tests/gpu/hf_peer.py --kvserve "$E2E_JSON" || echo "transformers peer failed or timed out"
else
  echo "transformers peer skipped (torch/transformers not importable, or --skip-e2e)"
fi

stamp "done: correctness rc=$checks_rc, bench rc=$bench_rc"
[ $checks_rc -eq 0 ] && [ $bench_rc -eq 0 ]
