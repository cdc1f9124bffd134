#!/usr/bin/env bash
# Installs the Debian packages kvserve builds against (a fresh Debian 12 machine, as root or with sudo).
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config git python3 python3-pip unzip ca-certificates
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler prometheus-cpp-dev
      libabsl-dev nlohmann-json3-dev libpcre2-dev libopenblas-dev libcli11-dev libcpp-httplib-dev libssl-dev openssl libgtest-dev libgmock-dev
      libbenchmark-dev clang libclang-rt-14-dev libomp-14-dev  # libomp: the clang build of tests/fuzz/run_request_fuzz.sh
      prometheus  # the real Prometheus that tests/server/serve/prometheus_scrape_test.py starts
      python3-venv chromium)  # tests/load/: kvload's venv, and the HTML report's headless screenshot
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
