#!/usr/bin/env python3
"""Writes kvserve.json, the Grafana dashboard, from the panel list below.

Edit this file, not the JSON: `python3 make_dashboard.py [OUT]` regenerates it, and
deploy/check.sh fails when the two differ. Panel ids are assigned in order, so they are
unique by construction; every query filters on the $instance variable.
"""
import json
import pathlib

SEL = '{instance=~"$instance"}'
RI = "$__rate_interval"


def sel(extra=""):
    return '{instance=~"$instance"' + (", " + extra if extra else "") + "}"


def quantiles(metric, by=""):
    """p50/p90/p99 of a histogram, plus the mean; `by` adds a label to group on."""
    group = "le" + (", " + by if by else "")
    legend = ("{{" + by + "}} " if by else "")
    out = [(f"histogram_quantile({q}, sum by ({group}) (rate({metric}_bucket{SEL}[{RI}])))",
            f"{legend}p{int(q * 100)}") for q in (0.5, 0.9, 0.99)]
    out.append((f"sum{' by (' + by + ')' if by else ''} (rate({metric}_sum{SEL}[{RI}])) / "
                f"sum{' by (' + by + ')' if by else ''} (rate({metric}_count{SEL}[{RI}]))", legend + "mean"))
    return out


def heatmap(metric):
    return [(f"sum by (le) (increase({metric}_bucket{SEL}[{RI}]))", "{{le}}")]


# (row, title, unit, kind, [(expr, legend)], description). kind: ts | heatmap.
PANELS = [
    ("Requests", "E2E request latency", "s", "ts", quantiles("kvserve_e2e_request_latency_seconds"),
     "From arrival to the last token, finished requests only."),
    ("Requests", "Token throughput", "tokens/s", "ts",
     [(f"sum(rate(kvserve_prompt_tokens_total{SEL}[{RI}]))", "prompt tokens/s"),
      (f"sum(rate(kvserve_generation_tokens_total{SEL}[{RI}]))", "generation tokens/s"),
      (f"sum(rate(kvserve_step_batch_size_sum{SEL}[{RI}]))", "live: sequences per step /s")],
     "The token counters move when a request finishes; sequences per engine step (one token each in "
     "decode) is the live rate during long generations."),
    ("Requests", "Time per output token", "s", "ts", quantiles("kvserve_inter_token_latency_seconds"),
     "Gap between consecutive tokens of one request."),
    ("Requests", "Time to first token", "s", "ts", quantiles("kvserve_time_to_first_token_seconds"), ""),
    ("Requests", "Scheduler state", "short", "ts",
     [(f"sum by (instance) (kvserve_num_requests_running{SEL})", "{{instance}} running"),
      (f"sum by (instance) (kvserve_num_requests_waiting{SEL})", "{{instance}} waiting")],
     "Running: admitted (prefilling or decoding). Waiting: queued for KV pages."),
    ("Requests", "Queue time", "s", "ts", quantiles("kvserve_request_queue_time_seconds"),
     "Arrival to admission (KV pages reserved)."),
    ("Requests", "Finish reason", "short", "ts",
     [(f"sum by (finish_reason) (increase(kvserve_request_success_total{SEL}[{RI}]))", "{{finish_reason}}")],
     "Finished requests per interval."),
    ("Requests", "Rejected requests by reason", "short", "ts",
     [(f"sum by (reason) (increase(kvserve_request_rejected_total{SEL}[{RI}]))", "{{reason}}")],
     "queue_full and too_large are capacity; invalid_argument is the client's."),
    ("Requests", "Prompt length", "short", "heatmap", heatmap("kvserve_request_prompt_tokens"),
     "Prompt tokens per request."),
    ("Requests", "Generation length", "short", "heatmap", heatmap("kvserve_request_generation_tokens"),
     "Generated tokens per request."),
    ("KV memory", "KV bytes: used, peak, pool", "bytes", "ts",
     [(f"sum by (instance) (kvserve_kv_bytes_used{SEL})", "{{instance}} used"),
      (f"max by (instance) (kvserve_kv_peak_bytes{SEL})", "{{instance}} peak"),
      (f"sum by (instance) (kvserve_kv_bytes_total{SEL})", "{{instance}} pool")],
     "Peak is since start; the pool is --kv-memory rounded to pages."),
    ("KV memory", "KV pages: used, reserved, total", "short", "ts",
     [(f"sum by (instance) (kvserve_kv_pages_used{SEL})", "{{instance}} used"),
      (f"sum by (instance) (kvserve_kv_pages_reserved{SEL})", "{{instance}} reserved"),
      (f"sum by (instance) (kvserve_kv_pages_total{SEL})", "{{instance}} total")],
     "Admission reserves a request's peak pages, so reserved >= used; reserved near total blocks new requests."),
    ("KV memory", "Cache utilization", "percentunit", "ts",
     [(f"max by (instance) (kvserve_kv_cache_usage_perc{SEL})", "{{instance}} used"),
      (f"max by (instance) (kvserve_kv_pages_reserved{SEL} / kvserve_kv_pages_total{SEL})",
       "{{instance}} reserved")], ""),
    ("KV memory", "Process RSS, peak RSS, limit", "bytes", "ts",
     [(f"sum by (instance) (kvserve_process_resident_memory_bytes{SEL})", "{{instance}} RSS"),
      (f"max by (instance) (kvserve_process_peak_resident_memory_bytes{SEL})", "{{instance}} peak"),
      (f"max by (instance) (kvserve_process_memory_limit_bytes{SEL})", "{{instance}} cgroup limit")],
     "The limit series exists only under a cgroup memory limit (a container with one)."),
    ("KV memory", "KV compression ratio", "percentunit", "ts", quantiles("kvserve_request_kv_compression_ratio"),
     "Entries kept / entries seen per request (1 = nothing evicted)."),
    ("KV memory", "Entries evicted per policy", "short", "ts",
     [(f"sum by (policy) (rate(kvserve_kv_entries_evicted_total{SEL}[{RI}]))", "{{policy}}")],
     "KV entries dropped (or merged) per second."),
    ("KV memory", "Device memory free", "bytes", "ts",
     [(f"min by (instance) (kvserve_device_memory_free_bytes{SEL})", "{{instance}}")],
     "GPU servers only (--device cuda); empty on the CPU backend."),
    ("Engine", "Step duration by phase", "s", "ts", quantiles("kvserve_step_duration_seconds", by="phase"),
     "One engine step: a prefill chunk (with decodes) or a decode-only step."),
    ("Engine", "Batch size", "short", "ts",
     [(f"sum by (instance) (kvserve_batch_current_size{SEL})", "{{instance}} current"),
      (f"sum(rate(kvserve_step_batch_size_sum{SEL}[{RI}])) / sum(rate(kvserve_step_batch_size_count{SEL}[{RI}]))",
       "mean per step")], ""),
    ("Engine", "Preemptions", "short", "ts",
     [(f"sum by (instance) (increase(kvserve_num_preemptions_total{SEL}[{RI}]))", "{{instance}}")], ""),
]

DS = {"type": "prometheus", "uid": "${datasource}"}


def panel(pid, title, unit, kind, targets, desc, x, y):
    p = {"id": pid, "title": title, "description": desc, "datasource": DS,
         "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
         "targets": [{"refId": chr(65 + i), "datasource": DS, "expr": e, "legendFormat": lg}
                     for i, (e, lg) in enumerate(targets)]}
    if kind == "heatmap":
        p["type"] = "heatmap"
        for t in p["targets"]:
            t["format"] = "heatmap"
        p["options"] = {"calculate": False, "yAxis": {"unit": unit}, "color": {"scheme": "Oranges"}}
    else:
        p["type"] = "timeseries"
        p["fieldConfig"] = {"defaults": {"unit": unit, "custom": {"fillOpacity": 10}}, "overrides": []}
        p["options"] = {"legend": {"displayMode": "list", "placement": "bottom"}, "tooltip": {"mode": "multi"}}
    return p


def dashboard():
    panels, pid, y, row = [], 1, 0, None
    col = 0
    for r, title, unit, kind, targets, desc in PANELS:
        if r != row:
            if col:
                y += 8
            panels.append({"id": pid, "type": "row", "title": r, "collapsed": False,
                           "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})
            pid, y, col, row = pid + 1, y + 1, 0, r
        panels.append(panel(pid, title, unit, kind, targets, desc, 12 * col, y))
        pid += 1
        col ^= 1
        if col == 0:
            y += 8
    return {
        "uid": "kvserve", "title": "kvserve", "tags": ["kvserve", "llm"], "editable": True,
        "schemaVersion": 39, "version": 1, "refresh": "10s", "time": {"from": "now-30m", "to": "now"},
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus",
             "current": {"text": "Prometheus", "value": "prometheus"}},
            {"name": "instance", "type": "query", "datasource": DS, "label": "Instance",
             "query": {"query": "label_values(kvserve_kv_pages_total, instance)", "refId": "instances"},
             "definition": "label_values(kvserve_kv_pages_total, instance)",
             "refresh": 2, "multi": True, "includeAll": True, "allValue": ".*",
             "current": {"text": "All", "value": "$__all"}},
        ]},
        "annotations": {"list": []},
        "panels": panels,
    }


if __name__ == "__main__":
    import sys
    out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).with_name("kvserve.json"))
    out.write_text(json.dumps(dashboard(), indent=1) + "\n")
