"""The environment scripts/run.sh and the image start kvserve with, for benchmark scripts that
start kvserve themselves: "both engines at their defaults" means kvserve's as a user gets it.
Only kvserve's child process gets it; the peer keeps its own (never our OpenMP settings)."""
import os
import subprocess

OPENMP_DEFAULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "openmp_defaults.sh")
OPENMP_VARS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


def kvserve_env(base, mode="launcher"):
    """`base` plus scripts/openmp_defaults.sh's settings (mode "launcher"), or `base` as is ("inherit")."""
    env = dict(base)
    if mode == "inherit":
        return env
    out = subprocess.check_output(
        ["sh", "-c", '. "$0" && printf "%s\\n%s\\n" "${OMP_WAIT_POLICY-}" "${GOMP_SPINCOUNT-}"', OPENMP_DEFAULTS],
        env=env, text=True)
    for name, value in zip(OPENMP_VARS, out.split("\n")):
        if value:
            env[name] = value
    return env


def add_argument(ap):
    ap.add_argument("--kvserve-env", choices=["launcher", "inherit"], default="launcher",
                    help="kvserve's OpenMP waiting: as scripts/run.sh and the image set it "
                         "(scripts/openmp_defaults.sh, default), or this shell's environment as is")
