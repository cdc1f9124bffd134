#!/usr/bin/env python3
"""Every command of kvserve and kvctl answers --help (exit 0, on stdout) and every flag it lists
has a meaning from server/flags/flag_help.cc's table.

    python3 tests/server/cli/help_test.py KVSERVE KVCTL
"""
import re
import subprocess
import sys

KVSERVE_COMMANDS = ["generate", "tokenize", "bench", "eval", "profile", "serve"]
KVCTL_COMMANDS = ["generate", "tokenize", "info", "health", "bench", "top"]


def flags_without_help(text):
    """Option lines of CLI11's help that have no description (on their line or the next)."""
    lines = text.split("\n")
    start = next(i for i, l in enumerate(lines) if l.startswith("Options:")) + 1
    missing = []
    for i in range(start, len(lines)):
        # rstrip: CLI11 pads an option with no description with spaces to the description column.
        m = re.match(r"^  (-\S+)(?: (\S+))?(\s{2,}\S.*)?$", lines[i].rstrip())
        if not m:
            continue
        described = m.group(3) or (i + 1 < len(lines) and re.match(r"^\s{20,}\S", lines[i + 1]))
        if not described:
            missing.append(m.group(1))
    return missing


def main():
    kvserve, kvctl = sys.argv[1], sys.argv[2]
    problems = []
    for program, commands in ((kvserve, KVSERVE_COMMANDS), (kvctl, KVCTL_COMMANDS)):
        name = "kvserve" if program == kvserve else "kvctl"
        for cmd in commands:
            r = subprocess.run([program, cmd, "--help"], capture_output=True, text=True, timeout=60)
            if r.returncode != 0 or f"Usage: {name} {cmd} [OPTIONS]" not in r.stdout:
                problems.append(f"{name} {cmd} --help: exit {r.returncode}, stdout {r.stdout[:200]!r}, "
                                f"stderr {r.stderr[:200]!r}")
                continue
            for flag in flags_without_help(r.stdout):
                problems.append(f"{name} {cmd}: {flag} has no line in server/flags/flag_help.cc")
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"--help of {len(KVSERVE_COMMANDS)} kvserve and {len(KVCTL_COMMANDS)} kvctl commands: every flag explained")
    return 0


if __name__ == "__main__":
    sys.exit(main())
