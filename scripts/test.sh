#!/usr/bin/env bash
# The test command: installs what is needed, builds, fetches the default model, runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
scripts/fetch-model.sh >/dev/null
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j "$(nproc)" "$@"
