#!/usr/bin/env python3
"""Renders the dashboard's KV-memory panels from a live Prometheus into a PNG (the README's
picture), for machines without Grafana. Needs matplotlib (PyPI).

  snapshot.py PROMETHEUS_URL OUT.png [--minutes 5]
"""
import argparse
import json
import time
import urllib.parse
import urllib.request

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import make_dashboard  # noqa: E402  (same folder: the panels' own queries)

PANELS = ["KV bytes: used, peak, pool", "KV pages: used, reserved, total", "Scheduler state",
          "Process RSS, peak RSS, limit"]


def query_range(prom, expr, start, end):
    q = urllib.parse.urlencode({"query": expr, "start": start, "end": end, "step": 5})
    with urllib.request.urlopen(f"{prom.rstrip('/')}/api/v1/query_range?{q}", timeout=10) as r:
        return json.load(r)["data"]["result"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("prometheus")
    ap.add_argument("out")
    ap.add_argument("--minutes", type=float, default=5)
    a = ap.parse_args()
    end = time.time()
    start = end - 60 * a.minutes
    by_title = {p[1]: p for p in make_dashboard.PANELS}
    fig, axes = plt.subplots(2, 2, figsize=(12, 6.5))
    for ax, title in zip(axes.flat, PANELS):
        _, _, unit, _, targets, _ = by_title[title]
        for expr, legend in targets:
            expr = expr.replace("$instance", ".*")
            for series in query_range(a.prometheus, expr, start, end):
                t = [float(v[0]) - end for v in series["values"]]
                y = [float(v[1]) / (2**20 if unit == "bytes" else 1) for v in series["values"]]
                label = legend.replace("{{instance}} ", "").replace("{{instance}}", "")
                ax.plot(t, y, label=label)
        ax.set_title(title + (" (MiB)" if unit == "bytes" else ""), fontsize=10)
        ax.set_xlabel("seconds before now", fontsize=8)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.suptitle("kvserve live KV memory (Prometheus, panels of deploy/grafana/kvserve.json)")
    fig.tight_layout()
    fig.savefig(a.out, dpi=80)


if __name__ == "__main__":
    main()
