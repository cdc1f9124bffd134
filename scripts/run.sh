#!/usr/bin/env bash
# The run command: installs, builds, fetches the default model and starts the gRPC server
# on it (port 50051, metrics on 9400), printing a kvctl command to try. Ctrl-C drains
# and stops it. Extra args go to `kvserve serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh >/dev/null
model=$(scripts/fetch-model.sh)
. scripts/openmp_defaults.sh  # OpenMP barrier waiting: spin briefly, then sleep
build=${BUILD_DIR:-build}
port=${PORT:-50051}
metrics_port=${METRICS_PORT:-9400}
cat <<MSG
Starting kvserve on $model (gRPC :$port, metrics http://localhost:$metrics_port/metrics).
Try, in another terminal:
  $build/kvctl generate --addr localhost:$port --stream --chat --prompt "What is the capital of France?" --max-new-tokens 64
  $build/kvctl info --addr localhost:$port
MSG
exec "$build"/kvserve serve --model "$model" --port "$port" --metrics-port "$metrics_port" "$@"
