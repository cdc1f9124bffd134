#!/usr/bin/env bash
# The test command: installs what is needed, builds, fetches the default model, runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
scripts/fetch-model.sh >/dev/null
repo=$PWD
cd "${BUILD_DIR:-build}"
# Tests run in parallel on few cores: OpenMP threads that spin at barriers while another
# process holds the core slow a step by 10-100x, so they sleep instead.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
ctest --output-on-failure -j "$(nproc)" "$@"
# Then deploy/: files, the image from these binaries, the compose stack with Prometheus and the
# load balancer (a few minutes; after ctest so it never competes with timing-sensitive tests).
# Skipped when ctest got a filter, or with KVSERVE_SKIP_DEPLOY_CHECK=1.
if [ $# -eq 0 ] && [ "${KVSERVE_SKIP_DEPLOY_CHECK:-0}" != 1 ]; then
  "$repo/deploy/check.sh" "$PWD"
fi
