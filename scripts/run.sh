#!/usr/bin/env bash
# The run command: installs, builds, fetches the default model and runs the main job
# (for now a chat generation from a demo prompt; the gRPC server replaces it).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh >/dev/null
model=$(scripts/fetch-model.sh)
exec "${BUILD_DIR:-build}"/kvserve generate --model "$model" --chat \
  --prompt "${PROMPT:-What is the capital of France? Answer in one sentence.}" --max-new-tokens 64 "$@"
