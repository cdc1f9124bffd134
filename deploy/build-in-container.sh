#!/usr/bin/env bash
# Builder stage of deploy/Containerfile: builds kvserve + kvctl (KVSERVE_CUDA=$1), fetches
# the default model and stages everything the runtime stage needs into $2.
set -euo pipefail
cuda=$1 out=$2
cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVSERVE_CUDA="$cuda"
cmake --build /build -j"$(nproc)" --target kvserve kvctl
# Debian's pip refuses system-wide installs; a download is not one, but pip still checks.
PIP_BREAK_SYSTEM_PACKAGES=1 scripts/fetch-model.sh >/dev/null
deploy/stage-runtime.sh "$out" /build/kvserve /build/kvctl models/SmolLM2-135M-Instruct.Q4_1.gguf
