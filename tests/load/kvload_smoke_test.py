#!/usr/bin/env python3
"""Smoke test of load-tests/kvload.py and report.py against a real `kvserve serve` on loopback.

Each scenario is a short, bounded kvload run (a few prompts; every request has a timeout); the
test checks what a user of the result files would notice: vLLM bench serve's field names with
sane values, RESOURCE_EXHAUSTED counted (not a crash) when the full cache cannot hold a prompt
while SnapKV in chunk mode serves the same prompts, the /metrics time series, progress lines,
and the report (report.md, report.html, PNGs) rendered by headless Chromium with the plots in it.

Usage: kvload_smoke_test.py KVSERVE [--venv VENV] --model random:tiny|PATH.gguf [--kv-memory 512K] [--long 1500]
         [--needle 1024,3000] [--budget 128] [--screenshot]
       (--venv: the venv of load-tests/setup-venv.sh, else the running Python must have its packages)
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LOAD_TESTS = os.path.join(HERE, "..", "..", "load-tests")
VLLM_FIELDS = ["duration", "completed", "failed", "total_input_tokens", "total_output_tokens", "request_throughput",
               "request_goodput", "output_throughput", "total_token_throughput", "input_lens", "output_lens", "ttfts",
               "itls"] + [f"{s}_{m}_ms" for m in ("ttft", "tpot", "itl", "e2el")
                          for s in ("mean", "median", "std", "p50", "p90", "p95", "p99")]
KVSERVE_FIELDS = ["rejected", "errors_by_code", "max_peak_kv_bytes", "kv_tokens_kept", "kv_entries_evicted",
                  "peak_kv_bytes", "metrics_timeseries", "peak_server_rss_bytes", "max_concurrent_requests"]
failures = []


def check(cond, what):
    print(f"{'ok ' if cond else 'BAD'} {what}", flush=True)
    if not cond:
        failures.append(what)


def start_server(a, work):
    ports = os.path.join(work, "ports")
    log = open(os.path.join(work, "server.log"), "w")
    proc = subprocess.Popen([a.kvserve, "serve", "--model", a.model, "--host", "127.0.0.1", "--port", "0",
                             "--metrics-host", "127.0.0.1", "--metrics-port", "0", "--http-port", "0",
                             "--port-file", ports,
                             "--kv-memory", a.kv_memory, "--max-context", str(a.max_context),
                             # Chunk-mode requests compress after every chunk: the smallest bound,
                             # which the needle scenario's "fits compressed, not full" pool relies on.
                             "--chunk-headroom", "0"],
                            stdout=log, stderr=log, env={**os.environ, "OMP_NUM_THREADS": a.threads})
    until = time.time() + 120
    while time.time() < until:
        try:
            p = dict(line.split("=") for line in open(ports).read().split())
            return proc, f"127.0.0.1:{p['grpc']}", f"127.0.0.1:{p['metrics']}", f"127.0.0.1:{p['http']}"
        except (OSError, ValueError, KeyError):
            if proc.poll() is not None:
                break
            time.sleep(0.2)
    proc.kill()
    sys.exit(f"FAIL: the server did not start: {open(log.name).read()[-2000:]}")


def kvload(name, addr, maddr, out_dir, *flags):
    """One kvload run; returns its result JSON and its stderr (the progress lines)."""
    cmd = [sys.executable, os.path.join(LOAD_TESTS, "kvload.py"), "--addr", addr, "--metrics-addr", maddr,
           "--scrape-interval", "0.2", "--progress-interval", "1", "--request-timeout", "120", "--save-result",
           "--result-dir", out_dir, "--result-filename", f"{name}.json", "--label", name.split("@")[0], *flags]
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
    print(f"--- {name}: rc {p.returncode} in {time.time() - t0:.1f}s\n{p.stderr[-1500:]}", flush=True)
    if p.returncode != 0:
        sys.exit(f"FAIL: kvload {name} exited {p.returncode}")
    with open(os.path.join(out_dir, f"{name}.json")) as f:
        return json.load(f), p.stderr


def check_result(name, r, sent):
    check(all(k in r for k in VLLM_FIELDS + KVSERVE_FIELDS),
          f"{name}: vLLM and kvserve fields present (missing {[k for k in VLLM_FIELDS + KVSERVE_FIELDS if k not in r]})")
    check(r["completed"] + r["failed"] == sent, f"{name}: completed {r['completed']} + failed {r['failed']} = {sent} sent")
    if r["completed"]:
        for m in ("ttft", "e2el"):
            check(0 < r[f"p50_{m}_ms"] <= r[f"p99_{m}_ms"] < 120e3, f"{name}: 0 < p50 <= p99 {m} < timeout")
            check(r[f"mean_{m}_ms"] > 0 and r[f"std_{m}_ms"] >= 0, f"{name}: mean/std {m} sane")
        check(r["p99_ttft_ms"] <= r["p99_e2el_ms"] + 1e-6, f"{name}: p99 TTFT <= p99 E2E")
        check(r["request_throughput"] > 0 and r["output_throughput"] > 0, f"{name}: throughputs > 0")
        check(r["total_token_throughput"] >= r["output_throughput"], f"{name}: total >= output token throughput")
        check(r["total_output_tokens"] == sum(n for n, ok in zip(r["output_lens"], r["success"]) if ok),
              f"{name}: total_output_tokens = sum of output_lens")
        check(r["max_peak_kv_bytes"] > 0, f"{name}: per-request peak KV bytes reported")
    if r.get("request_goodput") is not None:
        check(0 <= r["request_goodput"] <= r["request_throughput"] + 1e-9, f"{name}: 0 <= goodput <= throughput")
    ts = r["metrics_timeseries"]
    check(len(ts) >= 2 and all(s.get("rss_bytes", 0) > 1e6 for s in ts), f"{name}: /metrics time series ({len(ts)} samples)")
    check(len(r["input_lens"]) == len(r["ttfts"]) == len(r["itls"]) == sent, f"{name}: per-request lists of {sent}")


def check_peer_fake(work, out):
    """kvload's llama-server backend against fake_llama_server.py: same fields, no time series."""
    port_file = os.path.join(work, "peer-port")
    peer = subprocess.Popen([sys.executable, os.path.join(HERE, "fake_llama_server.py"), port_file])
    try:
        until = time.time() + 30
        while not (os.path.exists(port_file) and open(port_file).read()) and time.time() < until:
            time.sleep(0.1)
        port = open(port_file).read()
        r, _ = kvload("llama-server-fake", f"127.0.0.1:{port}", "", out, "--backend", "llama-server",
                      "--dataset", "short", "--num-prompts", "4", "--request-rate", "20", "--output-len", "8",
                      "--len-dist", "fixed", "--max-context", "4096")
        check(r["completed"] == 4 and r["total_output_tokens"] == 32 and r["p99_tpot_ms"] > 0,
              f"llama-server backend: 4 streamed completions of 8 tokens ({r['completed']}, {r['total_output_tokens']})")
        check(all(k in r for k in VLLM_FIELDS), "llama-server backend: vLLM fields present")
    finally:
        peer.terminate()
        peer.wait(timeout=30)


def check_report(results, out, screenshot, sweep):
    rep = os.path.join(out, "report")
    p = subprocess.run([sys.executable, os.path.join(LOAD_TESTS, "report.py"), *results, "--out", rep],
                       capture_output=True, text=True, timeout=300)
    print(p.stdout + p.stderr[-2000:], flush=True)
    check(p.returncode == 0, "report.py succeeded")
    pngs = sorted(os.path.basename(x) for x in glob.glob(os.path.join(rep, "*.png")))
    want = {"latency_cdf.png", "latency_over_time.png", "memory_over_time.png"} | ({"rate_sweep.png"} if sweep else set())
    check(want <= set(pngs), f"report plots {pngs}")
    page = open(os.path.join(rep, "report.html")).read() if os.path.exists(os.path.join(rep, "report.html")) else ""
    md = open(os.path.join(rep, "report.md")).read() if os.path.exists(os.path.join(rep, "report.md")) else ""
    check(all(f'src="{x}"' in page for x in want) and "p99 TTFT ms" in page, "report.html has the table and plots")
    check(all(f"({x})" in md for x in want), "report.md links the plots")
    if screenshot:
        check_screenshot(rep)


def check_screenshot(rep):
    """Headless Chromium renders report.html; the plots' coloured lines must be on the page, which
    only happens when the PNGs loaded (the table alone is black on white)."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        check(False, "chromium installed (scripts/setup.sh installs the Debian package)")
        return
    shot = os.path.join(rep, "screenshot.png")
    profile = tempfile.mkdtemp(prefix="kvload-chromium-")
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--user-data-dir={profile}", "--window-size=1400,3000", f"--screenshot={shot}",
                    "file://" + os.path.abspath(os.path.join(rep, "report.html"))],
                   capture_output=True, timeout=120)
    shutil.rmtree(profile, ignore_errors=True)
    if not os.path.exists(shot):
        check(False, "chromium wrote a screenshot")
        return
    import matplotlib.image
    img = matplotlib.image.imread(shot)[:, :, :3]
    spread = img.max(axis=2) - img.min(axis=2)  # 0 for black, white and greys
    coloured = float((spread > 0.25).mean())
    check(coloured > 0.002, f"screenshot shows the coloured plots ({coloured:.2%} coloured pixels)")


def reexec_in(venv):
    """Run under the venv's Python (load-tests/setup-venv.sh made it), where kvserve_client is."""
    python = os.path.join(venv, "bin", "python")
    if os.path.realpath(sys.prefix) != os.path.realpath(venv):
        if not os.path.exists(python):
            sys.exit(f"FAIL: no venv at {venv}: run load-tests/setup-venv.sh {venv}")
        os.execv(python, [python, *sys.argv])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kvserve")
    ap.add_argument("--venv", help="run in this venv (made by load-tests/setup-venv.sh)")
    ap.add_argument("--model", default="random:tiny")
    # 512K of random:tiny's f16 pages (the CPU default) is 240 pages: the 3000-token needle's
    # full cache (376 pages) never fits, the 1024-token one's (130) does.
    ap.add_argument("--kv-memory", default="512K", help="small, so a full-cache long prompt can never fit")
    ap.add_argument("--max-context", type=int, default=4096)
    ap.add_argument("--short-len", type=int, default=64)
    ap.add_argument("--long", type=int, default=1500, help="long prompts' tokens")
    ap.add_argument("--needle", default="1024,3000", help="needle lengths: the last one must not fit the pool")
    ap.add_argument("--needle-reps", type=int, default=2, help="prompts per needle length")
    ap.add_argument("--threads", default="1", help="the server's OMP_NUM_THREADS")
    ap.add_argument("--budget", type=int, default=128, help="SnapKV budget (tokens per layer), chunk mode")
    ap.add_argument("--output-len", type=int, default=16)
    ap.add_argument("--scale", type=int, default=1, help="divides the prompt counts (slow models)")
    ap.add_argument("--screenshot", action="store_true")
    ap.add_argument("--peer-fake", action="store_true", help="also drive fake_llama_server.py")
    ap.add_argument("--no-sweep", dest="sweep", action="store_false", help="skip the two-rate sweep")
    a = ap.parse_args()
    if a.venv:
        reexec_in(a.venv)
    work = tempfile.mkdtemp(prefix="kvload-smoke-")
    out = os.path.join(work, "results")
    proc, addr, maddr, http_addr = start_server(a, work)
    n = lambda k: max(2, k // a.scale)
    common = ["--output-len", str(a.output_len), "--input-len", str(a.short_len), "--len-dist", "uniform"]
    snap = ["--kv-policy", "snapkv", "--kv-budget", str(a.budget), "--compress-at", "chunk"]
    n_needle = a.needle_reps * len(a.needle.split(","))
    try:
        r, err = kvload("short", addr, maddr, out, "--dataset", "short", "--num-prompts", str(n(24)),
                        "--request-rate", "20", "--goodput", "ttft:60000", "tpot:10000", *common)
        check_result("short", r, n(24))
        check(r["failed"] == 0, "short: no failures")
        check(f"done {n(24)}/{n(24)}" in err and "server kv" in err, "short: progress lines with done/total and KV")
        grpc_short = r
        # The same workload through the OpenAI-compatible HTTP API of the same server.
        r, _ = kvload("short-openai", http_addr, maddr, out, "--backend", "openai", "--dataset", "short",
                      "--num-prompts", str(n(24)), "--request-rate", "20", "--goodput", "ttft:60000", "tpot:10000",
                      *common)
        check_result("short-openai", r, n(24))
        check(r["failed"] == 0 and r["total_input_tokens"] == grpc_short["total_input_tokens"]
              and r["total_output_tokens"] == grpc_short["total_output_tokens"],
              f"short-openai: the gRPC run's tokens in and out ({r['total_input_tokens']}/{r['total_output_tokens']} vs "
              f"{grpc_short['total_input_tokens']}/{grpc_short['total_output_tokens']})")
        for rate in ("5", "40") if a.sweep else ():  # a two-point rate sweep for the report's throughput-vs-rate plot
            r, _ = kvload(f"sweep@{rate}", addr, maddr, out, "--dataset", "short", "--num-prompts", str(n(12)),
                          "--request-rate", rate, "--goodput", "ttft:60000", *common)
            check_result(f"sweep@{rate}", r, n(12))

        n_long = max(1, 4 // a.scale)
        r, _ = kvload("long", addr, maddr, out, "--dataset", "long", "--long-len", str(a.long), "--num-prompts",
                      str(n_long), "--len-dist", "fixed", "--output-len", "8", *snap)
        check_result("long", r, n_long)
        check(r["failed"] == 0 and sum(r["kv_entries_evicted"]) > 0, "long: all served, SnapKV evicted entries")

        r, _ = kvload("bimodal", addr, maddr, out, "--dataset", "bimodal", "--long-len", str(a.long),
                      "--long-fraction", "0.25", "--num-prompts", str(n(16)), "--request-rate", "20",
                      "--kv-min-tokens", str(a.long // 2), *snap, *common)
        check_result("bimodal", r, n(16))
        check(r["failed"] == 0 and {"short", "long"} <= set(r["kinds"]), "bimodal: short and long all served")

        needle = ["--dataset", "needle", "--needle-lengths", a.needle, "--num-prompts", str(n_needle),
                  "--needle-output-len", "8", "--seed", "3"]
        r, _ = kvload("needle-full", addr, maddr, out, *needle, "--kv-policy", "full")
        check_result("needle-full", r, n_needle)
        reps = a.needle_reps
        check(r["rejected"] == reps and r["errors_by_code"] == {"RESOURCE_EXHAUSTED": reps}
              and r["completed"] == n_needle - reps,
              f"needle-full: the {reps} prompts too big for the pool counted RESOURCE_EXHAUSTED ({r['errors_by_code']})")
        r, _ = kvload("needle-snapkv", addr, maddr, out, *needle, *snap)
        check_result("needle-snapkv", r, n_needle)
        check(r["completed"] == n_needle and r["rejected"] == 0, "needle-snapkv: the same prompts all served")
        check(r["needle_total"] == n_needle, "needle-snapkv: every answer checked for its pass key")
        check(proc.poll() is None, "the server is still running")
        if a.peer_fake:
            check_peer_fake(work, out)
        check_report(sorted(glob.glob(os.path.join(out, "*.json"))), work, a.screenshot, a.sweep)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    if failures:
        print(f"FAIL: {len(failures)} checks failed (results kept in {work})")
        sys.exit(1)
    shutil.rmtree(work, ignore_errors=True)
    print("all checks passed")


if __name__ == "__main__":
    main()
