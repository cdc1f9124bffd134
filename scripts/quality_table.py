#!/usr/bin/env python3
"""Renders `kvserve eval --json` result files as the markdown tables docs/QUALITY.md holds.

    scripts/quality_table.py RESULT.json [RESULT.json ...]

One table of accuracy (retrieval) or KL (kl) with 95% intervals, one of the answer NLL gap to
the full cache, and each row's peak KV bytes during the prompt (the most over the columns).
Files are merged by (policy, budget) row and (task, context) column; a cell seen twice keeps
the first file's.
"""
import json
import sys


def fmt_value(cell):
    lo, hi = cell["ci95"]
    if cell["task"] == "kl":
        return f'{cell["mean"]:.4f} [{lo:.4f}, {hi:.4f}]'
    return f'{cell["mean"]:.2f} [{lo:.2f}, {hi:.2f}] (n={cell["n"]})'


def fmt_gap(cell):
    if "answer_nll_gap" not in cell:
        return "-"
    lo, hi = cell["answer_nll_gap_ci95"]
    return f'{cell["answer_nll_gap"]:.2f} [{lo:.2f}, {hi:.2f}]'


def main(paths):
    rows, columns, cells = [], [], {}
    for path in paths:
        with open(path) as f:
            result = json.load(f)
        for c in result["cells"]:
            row, col = (c["policy"], c["budget"]), (c["task"], c["context"])
            if row not in rows:
                rows.append(row)
            if col not in columns:
                columns.append(col)
            cells.setdefault((row, col), c)
    head = "| policy | budget | " + " | ".join(f"{t}@{n}" for t, n in columns) + " | peak KV (MB) |"
    rule = "|---|---:|" + "---:|" * (len(columns) + 1)
    for title, render in (("accuracy (KL for kl), 95% interval", fmt_value),
                          ("answer NLL gap to the full cache, nats, 95% interval", fmt_gap)):
        print(f"{title}:\n\n{head}\n{rule}")
        for row in rows:
            present = [cells.get((row, col)) for col in columns]
            peak = max((c["peak_kv_bytes"] for c in present if c), default=0)
            line = " | ".join(render(c) if c else "" for c in present)
            print(f"| {row[0]} | {row[1]} | {line} | {peak / 1e6:.1f} |")
        print()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
