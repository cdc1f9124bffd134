#!/usr/bin/env python3
"""Renders `kvserve eval --json` result files as the markdown tables docs/QUALITY.md holds.

    scripts/quality_table.py [--merge-samples] RESULT.json [RESULT.json ...]

One table of accuracy (retrieval) or KL (kl) with 95% intervals, one of the answer NLL gap to
the full cache, and each row's peak KV bytes during the prompt (the most over the columns).
Files are merged by (policy, budget) row and (task, context) column; a cell seen twice keeps
the first file's. With --merge-samples the files are slices of one run (`kvserve eval
--sample-range`, e.g. run in parallel): a cell's samples from every file are pooled and its
mean and intervals recomputed as the eval computes them (Wilson for accuracy, a percentile
bootstrap of the mean for KL and NLL gaps); files that repeat a cell's sample numbers are
refused (a glob that also matches another seed's slices, say).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from quality_stats import bootstrap_mean, wilson  # noqa: E402


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


def pooled(a, b):
    """Cell a with cell b's samples appended, its summary figures recomputed."""
    c = dict(a)
    c["values"] = a["values"] + b["values"]
    c["n"] = len(c["values"])
    c["mean"] = sum(c["values"]) / c["n"]
    if c["task"] == "kl":
        c["ci95"] = bootstrap_mean(c["values"], resamples=2000)
    else:
        c["ci95"] = wilson(sum(1 for v in c["values"] if v >= 0.5), c["n"])
    if "answer_nll_gaps" in a and "answer_nll_gaps" in b:
        c["answer_nll_gaps"] = a["answer_nll_gaps"] + b["answer_nll_gaps"]
        c["answer_nll_gap"] = sum(c["answer_nll_gaps"]) / len(c["answer_nll_gaps"])
        c["answer_nll_gap_ci95"] = bootstrap_mean(c["answer_nll_gaps"], resamples=2000)
    else:  # a slice run with --no-full-reference has none: a gap over part of the samples would mislead
        for key in ("answer_nll_gaps", "answer_nll_gap", "answer_nll_gap_ci95"):
            c.pop(key, None)
    # Per-sample lists pool in sample order; where one slice predates a field, a list covering
    # part of the samples would not line up with them, so the pooled cell has none.
    for key in ("answer_nlls", "needle_held", "cue_held", "decoy_held", "answers"):
        if key in a and key in b:
            c[key] = a[key] + b[key]
        else:
            c.pop(key, None)
    c["peak_kv_bytes"] = max(a["peak_kv_bytes"], b["peak_kv_bytes"])
    return c


def main(paths, merge_samples=False):
    rows, columns, cells = [], [], {}
    seen = {}  # (row, col): the sample numbers pooled so far
    for path in paths:
        with open(path) as f:
            result = json.load(f)
        meta = result.get("meta", {})
        first = meta.get("sample_range", [0])[0]
        for c in result["cells"]:
            row, col = (c["policy"], c["budget"]), (c["task"], c["context"])
            if merge_samples:
                # Pooling a sample twice would count it twice: slices must be disjoint.
                ids = set(range(first, first + len(c["values"])))
                if seen.get((row, col), set()) & ids:
                    sys.exit(f"quality_table: {path} repeats samples {sorted(seen[(row, col)] & ids)} of "
                             f"{row[0]}/{row[1]} on {col[0]}@{col[1]}; pass disjoint slices")
                seen[(row, col)] = seen.get((row, col), set()) | ids
            if row not in rows:
                rows.append(row)
            if col not in columns:
                columns.append(col)
            if merge_samples and (row, col) in cells:
                cells[(row, col)] = pooled(cells[(row, col)], c)
            else:
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
    args = [a for a in sys.argv[1:] if a != "--merge-samples"]
    if any(a in ("-h", "--help") for a in args):
        print(__doc__)
        sys.exit(0)
    if not args or any(a.startswith("--") for a in args):
        sys.exit(__doc__ + "".join(f"\nunknown flag {a}" for a in args if a.startswith("--")))
    main(args, merge_samples="--merge-samples" in sys.argv[1:])
