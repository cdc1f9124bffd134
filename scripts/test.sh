#!/usr/bin/env bash
# The test command: installs what is needed, builds, fetches the default model, runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
scripts/fetch-model.sh >/dev/null
cd "${BUILD_DIR:-build}"
# Tests run in parallel on few cores: OpenMP threads that spin at barriers while another
# process holds the core slow a step by 10-100x, so they sleep instead.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
ctest --output-on-failure -j "$(nproc)" "$@"
