#!/usr/bin/env python3
"""A real Prometheus (the Debian `prometheus` package) scrapes `kvserve serve`'s /metrics.

Starts the server on the tiny model and Prometheus on free loopback ports, sends traffic
with kvctl, then asks Prometheus's HTTP API for kvserve_ series and checks their values.
Usage: prometheus_scrape_test.py KVSERVE KVCTL
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

KVSERVE, KVCTL = sys.argv[1], sys.argv[2]
REQUESTS = 6
NEW_TOKENS = 8


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(pred, timeout, what):
    until = time.time() + timeout
    while time.time() < until:
        value = pred()
        if value:
            return value
        time.sleep(0.5)
    raise SystemExit(f"FAIL: timed out after {timeout}s waiting for {what}")


def main():
    prometheus = shutil.which("prometheus")
    if not prometheus:
        raise SystemExit("FAIL: prometheus is not installed (scripts/setup.sh installs the Debian package)")
    work = tempfile.mkdtemp(prefix="kvserve-prom-")
    procs = []
    try:
        ports = os.path.join(work, "ports")
        server_log = open(os.path.join(work, "server.log"), "w")
        procs.append(subprocess.Popen(
            [KVSERVE, "serve", "--model", "random:tiny", "--host", "127.0.0.1", "--port", "0",
             "--metrics-host", "127.0.0.1", "--metrics-port", "0", "--port-file", ports, "--kv-memory", "64M"],
            stderr=server_log))

        def read_ports():
            try:
                return dict(l.split("=") for l in open(ports).read().split())
            except (OSError, ValueError):
                return None
        p = wait_for(read_ports, 120, "the server's port file")
        addr = f"127.0.0.1:{p['grpc']}"
        metrics_port = int(p["metrics"])
        subprocess.run([KVCTL, "health", "--addr", addr, "--wait", "120"], check=True, stdout=subprocess.DEVNULL)
        # The HTTP probes beside /metrics: alive, and ready once gRPC health says SERVING.
        for path, want in (("/health", "ok\n"), ("/ready", "ready\n")):
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}{path}", timeout=10) as r:
                body = r.read().decode()
                if r.status != 200 or body != want:
                    raise SystemExit(f"FAIL: GET {path} -> {r.status} {body!r}")

        prom_port = free_port()
        config = os.path.join(work, "prometheus.yml")
        with open(config, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    "scrape_configs:\n  - job_name: kvserve\n    static_configs:\n"
                    f"      - targets: ['127.0.0.1:{metrics_port}']\n")
        procs.append(subprocess.Popen(
            [prometheus, f"--config.file={config}", f"--storage.tsdb.path={work}/tsdb",
             f"--web.listen-address=127.0.0.1:{prom_port}"],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "prometheus.log"), "w")))

        for i in range(REQUESTS):
            cmd = [KVCTL, "generate", "--addr", addr, "--prompt", f"request {i}", "--max-new-tokens",
                   str(NEW_TOKENS), "--ignore-eos"] + (["--stream"] if i % 2 else [])
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)

        def query(expr):
            url = f"http://127.0.0.1:{prom_port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
            try:
                with urllib.request.urlopen(url, timeout=10) as r:
                    data = json.load(r)
            except OSError:
                return None
            result = data.get("data", {}).get("result", [])
            return float(result[0]["value"][1]) if result else None

        # Prometheus needs a scrape after the traffic; wait until it sees all of it.
        wait_for(lambda: (query('kvserve_request_success_total{finish_reason="length"}') or 0) >= REQUESTS,
                 180, "Prometheus to see the finished requests")
        checks = {
            'up{job="kvserve"}': lambda v: v == 1,
            "kvserve_generation_tokens_total": lambda v: v >= REQUESTS * NEW_TOKENS,
            "kvserve_prompt_tokens_total": lambda v: v >= REQUESTS,
            "kvserve_time_to_first_token_seconds_count": lambda v: v >= REQUESTS,
            "histogram_quantile(0.5, kvserve_e2e_request_latency_seconds_bucket)": lambda v: 0 < v < 60,
            "kvserve_request_generation_tokens_sum": lambda v: v >= REQUESTS * NEW_TOKENS,
            'kvserve_step_duration_seconds_count{phase="decode"}': lambda v: v >= 1,
            "kvserve_kv_pages_total": lambda v: v > 0,
            "kvserve_kv_pages_used": lambda v: v == 0,
            "kvserve_kv_cache_usage_perc": lambda v: 0 <= v <= 1,
            "kvserve_kv_peak_bytes": lambda v: v > 0,
            "kvserve_num_requests_running": lambda v: v == 0,
            "kvserve_num_requests_waiting": lambda v: v == 0,
            "kvserve_process_resident_memory_bytes": lambda v: v > 1e6,
            "kvserve_process_peak_resident_memory_bytes": lambda v: v > 1e6,
            'kvserve_request_rejected_total{reason="queue_full"}': lambda v: v == 0,
            "kvserve_num_preemptions_total": lambda v: v == 0,
        }
        failed = 0
        for expr, ok in checks.items():
            v = query(expr)
            good = v is not None and ok(v)
            failed += not good
            print(f"{'ok ' if good else 'BAD'} {expr} = {v}")
        if failed:
            raise SystemExit(f"FAIL: {failed} of {len(checks)} series missing or insane")
        print(f"{len(checks)} passed, 0 failed")
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
