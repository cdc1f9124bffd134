#!/usr/bin/env python3
"""Checks deploy/grafana/kvserve.json against a live kvserve (and Prometheus).

  check_dashboard.py DASHBOARD --scrape METRICS.txt [--prometheus URL]

- valid JSON, unique panel ids, every panel the issue asks for is there;
- every kvserve_ metric a query names exists in the scrape (a live GET /metrics);
- with --prometheus: every query, with $instance = .* and $__rate_interval = 1m, returns at
  least one series (so send traffic first);
- label_values() template variables name a live metric (and list values, with Prometheus).
Metrics that exist only in some deployments (a GPU, a cgroup memory limit) may be absent; the
queries using them are reported as skipped, not failed.
"""
import argparse
import json
import re
import sys
import urllib.parse
import urllib.request

OPTIONAL = {"kvserve_device_memory_free_bytes", "kvserve_process_memory_limit_bytes"}
REQUIRED_TITLES = [
    "E2E request latency", "Token throughput", "Time per output token", "Scheduler state",
    "Time to first token", "Cache utilization", "Prompt length", "Generation length",
    "Finish reason", "Queue time", "KV bytes: used, peak, pool", "KV pages: used, reserved, total",
    "Process RSS, peak RSS, limit", "KV compression ratio", "Entries evicted per policy",
    "Rejected requests by reason", "Step duration by phase", "Device memory free",
]


def families(scrape_text):
    """Metric family names in a text exposition (histogram series map to their family)."""
    names = set()
    for line in scrape_text.splitlines():
        m = re.match(r"# TYPE (\S+) ", line) or re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]", line)
        if m:
            names.add(m.group(1))
    return names


def used_metrics(expr):
    return {re.sub(r"_(bucket|sum|count)$", "", m) for m in re.findall(r"\bkvserve_[a-z0-9_]+", expr)}


def query(prom, expr):
    url = prom.rstrip("/") + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as r:
        body = json.load(r)
    if body.get("status") != "success":
        raise RuntimeError(body.get("error", body))
    return body["data"]["result"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dashboard")
    ap.add_argument("--scrape", required=True)
    ap.add_argument("--prometheus")
    a = ap.parse_args()
    errors, skipped = [], []
    with open(a.dashboard) as f:
        d = json.load(f)
    panels = d["panels"] + [p for row in d["panels"] for p in row.get("panels", [])]
    ids = [p["id"] for p in panels]
    if len(ids) != len(set(ids)):
        errors.append(f"duplicate panel ids: {sorted(i for i in set(ids) if ids.count(i) > 1)}")
    titles = {p["title"] for p in panels}
    errors += [f"missing panel: {t}" for t in REQUIRED_TITLES if t not in titles]
    with open(a.scrape) as f:
        live = families(f.read())
    n_queries = 0
    for p in panels:
        for t in p.get("targets", []):
            n_queries += 1
            expr, names = t["expr"], used_metrics(t["expr"])
            missing = names - live
            if missing - OPTIONAL:
                errors.append(f"{p['title']}: {sorted(missing - OPTIONAL)} not in the live scrape")
                continue
            if missing:
                skipped.append(f"{p['title']} [{t['refId']}]: {sorted(missing)} absent here")
                continue
            if a.prometheus:
                q = expr.replace("$instance", ".*").replace("$__rate_interval", "1m")
                try:
                    if not query(a.prometheus, q):
                        errors.append(f"{p['title']} [{t['refId']}]: no data for {q}")
                except Exception as e:  # noqa: BLE001 - any failure is a check failure
                    errors.append(f"{p['title']} [{t['refId']}]: {e} for {q}")
    # Template variables: label_values(METRIC, LABEL) must name a live metric and, with
    # Prometheus, list at least one value (else the dashboard's instance picker is empty).
    for v in d.get("templating", {}).get("list", []):
        m = re.match(r"label_values\((\w+),\s*(\w+)\)", v.get("definition", ""))
        if not m:
            continue
        if m.group(1) not in live:
            errors.append(f"variable ${v['name']}: {m.group(1)} not in the live scrape")
        elif a.prometheus and not query(a.prometheus, f"count by ({m.group(2)}) ({m.group(1)})"):
            errors.append(f"variable ${v['name']}: no {m.group(2)} values")
    for s in skipped:
        print("check_dashboard: skipped", s)
    for e in errors:
        print("check_dashboard: FAIL", e)
    print(f"check_dashboard: {len(panels)} panels, {n_queries} queries, {len(skipped)} skipped, "
          f"{len(errors)} errors{'' if a.prometheus else ' (no Prometheus: names only)'}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
