#!/usr/bin/env python3
"""The layering of kvserve, checked: every `#include "..."` under kernels/, engine/ and server/
must point into a folder its own folder may depend on (ALLOWED below, the one table of edges;
docs/ARCHITECTURE.md explains it). Run by ctest as `layering`; by hand:

    python3 tests/layering_test.py [SOURCE_ROOT]

Exit 0 when every include is allowed; otherwise one line per offending include, naming the
file, the line, the included path and the edge it would add, and exit 1.
"""
import os
import re
import sys

# folder -> folders whose headers it may include directly. Dependencies are transitive
# (engine/compress may include what engine/model may), except through PRIVATE folders:
# a backend's implementation is named only by the folders listed as its direct users.
ALLOWED = {
    "kernels": ["kernels/cpu"],  # kv_rows.cc converts fp16 rows with cpu/half.h
    "kernels/cpu": ["kernels"],
    "kernels/cuda": ["kernels", "kernels/cpu"],  # weight_cache dequantizes with the CPU code
    "engine/tokenizer": [],
    "engine/kv": ["kernels"],
    "engine/model": ["kernels", "engine/kv", "engine/tokenizer"],
    "engine/budget": ["engine/model"],
    "engine/compress": ["kernels", "engine/kv", "engine/model", "engine/budget"],
    "engine/scheduler": ["engine/compress"],
    "engine": ["engine/scheduler"],  # engine/generator.*: one prompt as a one-request scheduler run
    "engine/offline": ["engine"],
    "server/flags": [],  # command-line parsing shared by the three programs
    "server/serve": ["server/flags", "engine", "kernels/cuda", "proto"],
    "server/cli": ["server/serve", "engine/offline"],
    "server/kvctl": ["server/flags", "proto"],
}
PRIVATE = {"kernels/cpu", "kernels/cuda"}

# Single includes that cross an edge on purpose, each with the reason it is still there (none now).
EXCEPTIONS = {}

SCANNED = ("kernels", "engine", "server")
SOURCE_SUFFIXES = (".h", ".cc", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def folder_of(path):
    """The ALLOWED key a repository path belongs to, 'proto' for generated API headers,
    'tests' for test helpers, or None for third-party headers (absl/, grpcpp/, ...)."""
    parts = path.split("/")
    if parts[0] == "kvserve":
        return "proto"
    if parts[0] == "tests":
        return "tests"
    if parts[0] not in SCANNED:
        return None
    folder = "/".join(parts[:-1])
    while folder and folder not in ALLOWED:
        folder = folder.rsplit("/", 1)[0] if "/" in folder else ""
    return folder or parts[0]


def reachable(folder):
    """Every folder `folder` may include: its direct deps and, through non-private deps, theirs
    (a private folder only when named directly)."""
    direct = ALLOWED.get(folder, [])
    seen, todo = set(direct), [f for f in direct if f not in PRIVATE]
    while todo:
        for f in ALLOWED.get(todo.pop(), []):
            if f not in seen and f not in PRIVATE:
                seen.add(f)
                todo.append(f)
    return seen


def check(root):
    problems = []
    for top in SCANNED:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith(SOURCE_SUFFIXES):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), root)
                src = folder_of(rel)
                if src not in ALLOWED:
                    problems.append(f"{rel}: folder {src} has no row in tests/layering_test.py's ALLOWED")
                    continue
                ok = reachable(src) | {src}
                with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        inc = m.group(1)
                        if "/" not in inc:  # relative to the including file
                            inc = os.path.join(os.path.dirname(rel), inc)
                        dst = folder_of(inc)
                        if dst is None or dst in ok or (rel, m.group(1)) in EXCEPTIONS:
                            continue
                        problems.append(f"{rel}:{lineno}: includes \"{m.group(1)}\": {src} -> {dst} "
                                        f"is not an allowed edge")
    return problems


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    problems = check(os.path.abspath(root))
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} include(s) cross the layering (tests/layering_test.py, docs/ARCHITECTURE.md)")
        return 1
    print("every include follows the layering")
    return 0


if __name__ == "__main__":
    sys.exit(main())
