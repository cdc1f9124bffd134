#!/usr/bin/env bash
# Runs inside a runtime stage of deploy/Containerfile on the folder deploy/stage-runtime.sh
# made: installs the listed Debian packages, the binaries, extra libraries and the model,
# adds the non-root user, and removes the folder.
set -euo pipefail
src=$1
apt-get update -qq
DEBIAN_FRONTEND=noninteractive xargs -a "$src/runtime-packages.txt" \
  apt-get install -y -qq --no-install-recommends
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
install -m 0755 "$src/kvserve" "$src/kvctl" /usr/local/bin/
install -m 0755 "$src/entrypoint.sh" /usr/local/bin/kvserve-entrypoint
if [ -n "$(ls -A "$src/lib")" ]; then
  mkdir -p /usr/local/lib/kvserve && cp -a "$src/lib/." /usr/local/lib/kvserve/
  echo /usr/local/lib/kvserve > /etc/ld.so.conf.d/kvserve.conf
fi
ldconfig
mkdir -p /models && cp -a "$src/model/." /models/
useradd --no-create-home --uid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin kvserve
rm -rf "$src"
kvserve --help >/dev/null 2>&1 || { echo "install-runtime: kvserve does not start" >&2; ldd /usr/local/bin/kvserve >&2; exit 1; }
