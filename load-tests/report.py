#!/usr/bin/env python3
"""Turns kvload result files into a report: report.md and report.html with PNG plots.

  python3 load-tests/report.py results/*.json --out report/

One line (or panel) per result file, named by its "label": run the configurations of an A/B
(kvserve vs llama-server, full cache vs SnapKV at 10%) with different --label, and a rate sweep
with the same --label and different --request-rate. Plots: TTFT/ITL/E2E CDFs; latency over time
with long prompts' prefills shaded; server KV bytes and RSS over time against the pool (and a
"kv_bound_bytes" given with --metadata); throughput and goodput against request rate."""
import argparse
import html
import json
import math
import os

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

COLUMNS = [  # (header, key, format)
    ("label", "label", "{}"), ("dataset", "dataset_name", "{}"), ("rate req/s", "request_rate", "{:g}"),
    ("completed", "completed", "{}"), ("failed", "failed", "{}"), ("rejected", "rejected", "{}"),
    ("req/s", "request_throughput", "{:.2f}"), ("goodput req/s", "request_goodput", "{:.2f}"),
    ("out tok/s", "output_throughput", "{:.1f}"), ("p50 TTFT ms", "p50_ttft_ms", "{:.1f}"),
    ("p99 TTFT ms", "p99_ttft_ms", "{:.1f}"), ("p99 TPOT ms", "p99_tpot_ms", "{:.1f}"),
    ("p99 ITL ms", "p99_itl_ms", "{:.1f}"), ("p99 E2E ms", "p99_e2el_ms", "{:.1f}"),
    ("max concurrent", "max_concurrent_requests", "{}"), ("max req KV MB", "max_peak_kv_bytes", "mb"),
    ("peak server KV MB", "peak_server_kv_bytes", "mb"), ("peak RSS MB", "peak_server_rss_bytes", "mb"),
    ("needle found", "needle_found", "{}"),
]


def fmt(res, key, f):
    v = res.get(key)
    if v is None:
        return "-"
    if f == "mb":
        return f"{v / 1e6:.1f}"
    if isinstance(v, str):
        return v
    if key == "needle_found":
        return f"{v}/{res.get('needle_total', 0)}" if res.get("needle_total") else "-"
    return f.format(v)


def label_of(res, path):
    return res.get("label") or os.path.splitext(os.path.basename(path))[0]


def cdf(ax, values, label):
    v = sorted(values)
    if v:
        ax.plot(v, [(i + 1) / len(v) for i in range(len(v))], label=label)


def plot_cdfs(results, out):
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for res in results:
        # vLLM's own result files have no "success": they list completed requests only
        ok = res.get("success") or [True] * len(res.get("ttfts", []))
        pick = lambda key: [x * 1e3 for x, good in zip(res.get(key, []), ok) if good]
        cdf(axes[0], pick("ttfts"), res["label"])
        cdf(axes[1], [x * 1e3 for xs, good in zip(res.get("itls", []), ok) if good for x in xs], res["label"])
        cdf(axes[2], pick("e2els"), res["label"])
    for ax, name in zip(axes, ("TTFT", "ITL", "E2E latency")):
        ax.set(xlabel=f"{name} (ms)", ylabel="fraction of requests" if name != "ITL" else "fraction of gaps",
               title=f"{name} CDF")
        ax.set_xscale("log")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return save(fig, out, "latency_cdf.png")


def plot_over_time(results, out):
    fig, axes = plt.subplots(len(results), 1, figsize=(12, 3 * len(results)), squeeze=False)
    for ax, res in zip(axes[:, 0], results):
        rows = list(zip(res.get("start_times", []), res.get("ttfts", []), res.get("e2els", []),
                        res.get("kinds", []), res.get("success", [])))
        for start, ttft, _, kind, ok in rows:
            if ok and kind in ("long", "needle"):  # queue + prefill of a long prompt: what short ones wait behind
                ax.axvspan(start, start + ttft, color="orange", alpha=0.15, lw=0)
        for kind, marker in (("short", "o"), ("long", "s"), ("needle", "^")):
            pts = [(s + e, e * 1e3) for s, t, e, k, ok in rows if ok and k == kind]
            if pts:
                ax.scatter(*zip(*pts), s=10, marker=marker, label=f"{kind}: E2E at completion")
        fails = [s for s, t, e, k, ok in rows if not ok]
        if fails:
            ax.scatter(fails, [1] * len(fails), marker="x", color="red", label="failed (sent at)")
        ax.set(yscale="log", ylabel="ms",
               title=f"{res['label']}: latency over time (orange: long prompts, sent to first token)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    axes[-1, 0].set_xlabel("seconds since the run started")
    return save(fig, out, "latency_over_time.png")


def plot_memory(results, out):
    series = [r for r in results if r.get("metrics_timeseries")]
    if not series:
        return None
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(15, 4))
    for i, res in enumerate(series):
        ts = res["metrics_timeseries"]
        t = [s["t"] for s in ts]
        color = f"C{i}"
        ax.plot(t, [s.get("kv_bytes_used", 0) / 1e6 for s in ts], color=color, label=f"{res['label']} KV")
        ax.plot(t, [s.get("rss_bytes", 0) / 1e6 for s in ts], color=color, ls=":", label=f"{res['label']} RSS")
        if res.get("kv_pool_bytes"):
            ax.axhline(res["kv_pool_bytes"] / 1e6, color=color, ls="--", lw=1, label=f"{res['label']} KV pool")
        if res.get("kv_bound_bytes"):
            ax.axhline(float(res["kv_bound_bytes"]) / 1e6, color=color, ls="-.", lw=1, label=f"{res['label']} bound")
        ax2.plot(t, [s.get("kv_pages_used", 0) for s in ts], color=color, label=f"{res['label']} used")
        if ts and ts[-1].get("kv_pages_total"):
            ax2.axhline(ts[-1]["kv_pages_total"], color=color, ls="--", lw=1, label=f"{res['label']} total")
    ax.set(xlabel="seconds", ylabel="MB", title="server KV bytes (solid) and RSS (dotted)")
    ax2.set(xlabel="seconds", ylabel="pages", title="KV pages in use against the pool")
    for a in (ax, ax2):
        a.grid(alpha=0.3)
        a.legend(fontsize=7)
    return save(fig, out, "memory_over_time.png")


def plot_rate(results, out):
    groups = {}
    for res in results:
        rate = res.get("request_rate")
        if rate is not None and not math.isinf(float(rate)):
            groups.setdefault(res["label"], []).append(res)
    if not any(len(g) > 1 for g in groups.values()):
        return None
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(14, 4))
    for i, (label, g) in enumerate(groups.items()):  # one colour per configuration
        g.sort(key=lambda r: float(r["request_rate"]))
        x, c = [float(r["request_rate"]) for r in g], f"C{i}"
        ax.plot(x, [r["request_throughput"] for r in g], color=c, marker="o", label=f"{label} throughput")
        if any(r.get("request_goodput") is not None for r in g):
            ax.plot(x, [r.get("request_goodput") or 0 for r in g], color=c, marker="x", ls="--",
                    label=f"{label} goodput")
        ax2.plot(x, [r["p99_ttft_ms"] for r in g], color=c, marker="o", label=f"{label} p99 TTFT")
        ax2.plot(x, [r["p99_e2el_ms"] for r in g], color=c, marker="s", ls="--", label=f"{label} p99 E2E")
    ax.set(xlabel="offered request rate (req/s)", ylabel="completed req/s", title="throughput and goodput")
    ax2.set(xlabel="offered request rate (req/s)", ylabel="ms", yscale="log", title="p99 latency")
    for a in (ax, ax2):
        a.grid(alpha=0.3)
        a.legend(fontsize=8)
    return save(fig, out, "rate_sweep.png")


def save(fig, out, name):
    fig.tight_layout()
    fig.savefig(os.path.join(out, name), dpi=90)
    plt.close(fig)
    return name


def write_md(results, plots, out):
    lines = ["# kvload report", "", "| " + " | ".join(h for h, _, _ in COLUMNS) + " |",
             "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(fmt(r, k, f) for _, k, f in COLUMNS) + " |" for r in results]
    lines += ["", "Sources: " + ", ".join(f"`{r['_file']}`" for r in results), ""]
    lines += [f"![{p}]({p})" for p in plots]
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def write_html(results, plots, out):
    e = html.escape
    head = "".join(f"<th>{e(h)}</th>" for h, _, _ in COLUMNS)
    rows = "".join("<tr>" + "".join(f"<td>{e(fmt(r, k, f))}</td>" for _, k, f in COLUMNS) + "</tr>" for r in results)
    imgs = "".join(f'<figure><img src="{e(p)}" alt="{e(p)}"><figcaption>{e(p)}</figcaption></figure>' for p in plots)
    page = f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>kvload report</title>
<style>body{{font-family:sans-serif;margin:1em}} table{{border-collapse:collapse;font-size:12px}}
td,th{{border:1px solid #999;padding:2px 6px;text-align:right}} img{{max-width:100%}}</style></head>
<body><h1>kvload report</h1><table><tr>{head}</tr>{rows}</table>{imgs}</body></html>
"""
    with open(os.path.join(out, "report.html"), "w") as f:
        f.write(page)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+", help="kvload result JSON files")
    ap.add_argument("--out", default="report", help="folder for report.md, report.html and the PNGs")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    results = []
    for path in a.results:
        with open(path) as f:
            res = json.load(f)
        res["label"], res["_file"] = label_of(res, path), os.path.basename(path)
        results.append(res)
    plots = [p for p in (plot_cdfs(results, a.out), plot_over_time(results, a.out), plot_memory(results, a.out),
                         plot_rate(results, a.out)) if p]
    write_md(results, plots, a.out)
    write_html(results, plots, a.out)
    print(f"report: {os.path.join(a.out, 'report.html')} ({len(results)} results, {len(plots)} plots)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
