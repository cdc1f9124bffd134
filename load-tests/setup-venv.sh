#!/usr/bin/env bash
# Makes VENV a Python venv with kvload's and report.py's dependencies (requirements.txt, from PyPI)
# and kvserve_client built from proto/ (its stubs are generated at install). Does nothing when
# VENV already holds exactly these inputs, so repeated test runs stay fast.
# Usage: load-tests/setup-venv.sh VENV
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
venv=${1:?usage: setup-venv.sh VENV}
proto="$here/../proto/kvserve/v1/generation.proto"
want=$(cat "$here/requirements.txt" "$proto" "$here/kvserve_client/pyproject.toml" "$here/kvserve_client/setup.py" \
       "$here"/kvserve_client/kvserve_client/*.py | sha256sum | cut -d' ' -f1)
stamp="$venv/.kvload-inputs"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt"
# Built from a copy: the source tree stays free of build/ and egg-info, and two builds never race.
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cp -r "$here/kvserve_client" "$tmp/"
KVSERVE_PROTO="$proto" "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$tmp/kvserve_client"
echo "$want" > "$stamp"
echo "setup-venv: $venv ready"
