#!/usr/bin/env python3
"""scripts/openmp_defaults.sh (sourced by scripts/run.sh) and the image's ENV give kvserve the same
OpenMP barrier spin, a user's own setting wins, and libgomp inside kvserve really runs with it.

Usage: openmp_defaults_test.py KVSERVE_BINARY"""
import os
import re
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import launch_env  # noqa: E402  (the benchmarks' reader of scripts/openmp_defaults.sh)

BASE_ENV = {k: v for k, v in os.environ.items() if k not in launch_env.OPENMP_VARS}


def sourced(**env):
    """OMP_WAIT_POLICY and GOMP_SPINCOUNT as kvserve gets them from the defaults under `env` ('-' = unset)."""
    got = launch_env.kvserve_env({**BASE_ENV, **env})
    return "|".join(got.get(v, "-") for v in launch_env.OPENMP_VARS)


def libgomp_spincount(kvserve, env):
    """The spin count libgomp reports (OMP_DISPLAY_ENV) inside a kvserve run under `env`."""
    run = subprocess.run([kvserve, "bench", "--model", "random:tiny", "--prompt-tokens", "4", "--new-tokens", "1",
                          "--repeats", "1"], env={**env, "OMP_DISPLAY_ENV": "VERBOSE", "OMP_NUM_THREADS": "2"},
                         capture_output=True, text=True, check=True, timeout=120)
    m = re.search(r"GOMP_SPINCOUNT = '(\d+)'", run.stderr + run.stdout)
    assert m, f"libgomp printed no GOMP_SPINCOUNT: {run.stderr[-2000:]}"
    return int(m.group(1)), run.stdout


def main():
    kvserve = sys.argv[1]
    fails = []

    def check(what, got, want):
        if got != want:
            fails.append(f"{what}: got {got!r}, want {want!r}")

    default = sourced()
    check("nothing set", default.split("|")[0], "-")
    spin = default.split("|")[1]
    if not spin.isdigit() or not 0 < int(spin) < 300000:
        fails.append(f"the default spin count {spin!r} is not a bounded count below libgomp's 300,000")
    check("empty OMP_WAIT_POLICY counts as unset", sourced(OMP_WAIT_POLICY=""), f"|{spin}")
    check("the user's policy kept", sourced(OMP_WAIT_POLICY="passive"), "passive|-")
    check("the user's spin count kept", sourced(GOMP_SPINCOUNT="5"), "-|5")

    containerfile = open(os.path.join(ROOT, "deploy", "Containerfile")).read()
    env_lines = re.findall(r"^ENV GOMP_SPINCOUNT=(\S+)$", containerfile, re.M)
    check("the image's ENV GOMP_SPINCOUNT", env_lines, [spin])
    if re.search(r"^ENV OMP_WAIT_POLICY", containerfile, re.M):
        fails.append("the image still sets OMP_WAIT_POLICY (an explicit GOMP_SPINCOUNT already decides the wait)")
    run_sh = open(os.path.join(ROOT, "scripts", "run.sh")).read()
    if not re.search(r"^\. scripts/openmp_defaults\.sh", run_sh, re.M):
        fails.append("scripts/run.sh does not source scripts/openmp_defaults.sh")

    # libgomp reads the environment once, as kvserve starts: the count must reach it, and
    # kvserve bench must say which setting it ran under.
    got, stdout = libgomp_spincount(kvserve, {**BASE_ENV, "GOMP_SPINCOUNT": spin})
    check("libgomp's spin count in kvserve", got, int(spin))
    check("kvserve bench's omp_wait", re.search(r'"omp_wait":"([^"]*)"', stdout).group(1), f"GOMP_SPINCOUNT={spin}")
    got, stdout = libgomp_spincount(kvserve, {**BASE_ENV, "OMP_WAIT_POLICY": "passive"})
    check("libgomp's spin count under passive", got, 0)
    check("kvserve bench's omp_wait under passive", re.search(r'"omp_wait":"([^"]*)"', stdout).group(1),
          "OMP_WAIT_POLICY=passive")

    for f in fails:
        print("FAIL:", f)
    if fails:
        sys.exit(1)
    print(f"ok: default GOMP_SPINCOUNT={spin} in scripts/openmp_defaults.sh and the image, user settings kept")


if __name__ == "__main__":
    main()
