#!/usr/bin/env python3
"""Every shell script that moves to the repository root from its own place gets there.

Scripts find the root as "$(dirname "$0")/<relative path>"; when a script moves folders (the
GPU scripts went from tests/gpu/ to tests/kernels/cuda/) a stale relative path silently runs
CMake on the wrong folder, which nothing else notices without a GPU machine. This checks each
`cd "$(dirname "$0")/REL"` and `root=$(cd "$(dirname "$0")/REL" && pwd)` against the real root.
"""
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
PATTERN = re.compile(r'^\s*(?:cd|root=\$\(cd) "\$\(dirname "\$0"\)(/[./]*)?"')


def main() -> int:
    files = subprocess.run(["git", "ls-files", "*.sh", ".ci/run"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    checked, bad = 0, []
    for name in files:
        script = ROOT / name
        for number, line in enumerate(script.read_text().splitlines(), 1):
            match = PATTERN.match(line)
            if not match:
                continue
            target = (script.parent / (match.group(1) or "/.").lstrip("/")).resolve()
            checked += 1
            top = target / "CMakeLists.txt"
            if not (top.exists() and "project(kvserve" in top.read_text()):
                bad.append(f"{name}:{number}: goes to {target}, not the repository root {ROOT}")
    for line in bad:
        print(line)
    print(f"{checked} root-finding lines checked in {len(files)} scripts, {len(bad)} wrong")
    return 1 if bad or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
