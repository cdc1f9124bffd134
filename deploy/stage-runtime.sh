#!/usr/bin/env bash
# Stages OUT for a runtime stage of deploy/Containerfile: the binaries, the model (optional),
# runtime-packages.txt (the Debian packages owning the shared libraries they link) and lib/
# (libraries no Debian package owns, e.g. CUDA's under /usr/local/cuda, copied as is).
# Usage: stage-runtime.sh OUT KVSERVE KVCTL [MODEL.gguf]
set -euo pipefail
out=$1 kvserve=$2 kvctl=$3 model=${4:-}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out/lib" "$out/model"
cp "$kvserve" "$kvctl" "$out/"
[ -z "$model" ] || cp "$model" "$out/model/"
cp "$here/install-runtime.sh" "$here/entrypoint.sh" "$out/"
: > "$out/runtime-packages.txt.tmp"
for lib in $(ldd "$kvserve" "$kvctl" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u); do
  real=$(readlink -f "$lib")
  owner=$(dpkg -S "$lib" 2>/dev/null || dpkg -S "$real" 2>/dev/null || true)
  case "$real" in /usr/local/*|/opt/*) owner="";; esac
  if [ -n "$owner" ]; then
    echo "${owner%%:*}" >> "$out/runtime-packages.txt.tmp"
  else
    cp -L "$lib" "$out/lib/$(basename "$lib")"
  fi
done
sort -u "$out/runtime-packages.txt.tmp" > "$out/runtime-packages.txt"
rm "$out/runtime-packages.txt.tmp"
