#!/usr/bin/env python3
"""Health and cancellation stay fast while the engine is busy (issue 19, finding 2).

Against a real `kvserve serve` on SmolLM2: 16 streams with long prompts keep the engine in
multi-second prefill steps. Meanwhile a gRPC health check is made every 50 ms: its p99 must
stay under 100 ms (Submit and Abort used to hold gRPC's callback threads waiting for the
step lock, so health took 3 to 13 s). Then one stream is cancelled mid-prefill: the server
must have processed the cancellation (its pages freed, counted as finish_reason="cancelled")
within the step that was running plus one scrape's worth of slack, i.e. at most 2 engine
steps after the cancel, where it used to take 10 to 22 s.

Usage: health_under_load_test.py KVSERVE MODEL.gguf --venv VENV [--streams 16] [--prompt-words 800]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("kvserve")
    p.add_argument("model")
    p.add_argument("--venv", required=True)
    p.add_argument("--streams", type=int, default=16)
    p.add_argument("--prompt-words", type=int, default=800)
    p.add_argument("--seconds", type=float, default=12, help="how long health is probed under load")
    return p.parse_args()


def scrape(port):
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    out = {}
    for line in body.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        name, value = line.rsplit(" ", 1)
        out[name] = float(value)
    return out


def steps(m):
    return sum(v for k, v in m.items() if k.startswith("kvserve_step_duration_seconds_count"))


def cancelled(m):
    return m.get('kvserve_request_success_total{finish_reason="cancelled"}', 0)


def main():
    args = parse_args()
    if os.path.realpath(sys.prefix) != os.path.realpath(args.venv):
        py = os.path.join(args.venv, "bin", "python")
        os.execv(py, [py] + sys.argv)
    import grpc
    from kvserve_client import Client

    if not os.path.exists(args.model):
        print(f"SKIP: {args.model} not found (scripts/fetch-model.sh)")
        return 0
    work = tempfile.mkdtemp(prefix="kvserve-health-")
    ports = os.path.join(work, "ports")
    log_path = os.path.join(work, "server.log")
    server = subprocess.Popen([args.kvserve, "serve", "--model", args.model, "--host", "127.0.0.1", "--port", "0",
                               "--metrics-host", "127.0.0.1", "--metrics-port", "0", "--port-file", ports,
                               "--kv-memory", "2G", "--kv-dtype", "f16"], stderr=open(log_path, "w"))
    failures = []
    try:
        deadline = time.time() + 120
        while not (os.path.exists(ports) and "metrics=" in open(ports).read()) and time.time() < deadline:
            time.sleep(0.1)
        text = open(ports).read()
        addr = "127.0.0.1:" + text.split("grpc=")[1].split()[0]
        mport = int(text.split("metrics=")[1].split()[0])
        channel = grpc.insecure_channel(addr)
        health = channel.unary_unary("/grpc.health.v1.Health/Check", request_serializer=lambda b: b,
                                     response_deserializer=lambda b: b)
        while health(b"", timeout=10) != b"\x08\x01" and time.time() < deadline:  # SERVING
            time.sleep(0.2)

        words = "the history of the long context window is a history of memory and of attention".split()
        from kvserve_client.request import build_request
        client = Client(addr, timeout=600)

        def prompt(i):
            return " ".join(words[(i + j) % len(words)] for j in range(args.prompt_words))

        def drain(call):
            try:
                for _ in call:
                    pass
            except Exception:
                pass  # the cancelled one ends with CANCELLED

        def run(i):
            drain(client.generate_stream(prompt(i), max_new_tokens=8, ignore_eos=True))

        threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(args.streams)]
        for t in threads:
            t.start()
        # One more stream, last in the queue, to cancel while it prefills.
        target = client.stub.GenerateStream(build_request(prompt(99), max_new_tokens=8, ignore_eos=True), timeout=600)
        threads.append(threading.Thread(target=drain, args=(target,), daemon=True))
        threads[-1].start()
        while scrape(mport).get("kvserve_num_requests_running", 0) < 2 and time.time() < deadline:
            time.sleep(0.05)

        # Health every 50 ms on a thread of its own, for the whole busy period.
        latencies, probing = [], threading.Event()
        probing.set()

        def probe():
            end = time.time() + args.seconds
            while probing.is_set() and time.time() < end:
                t0 = time.perf_counter()
                health(b"", timeout=30)
                latencies.append(time.perf_counter() - t0)
                time.sleep(0.05)

        prober = threading.Thread(target=probe, daemon=True)
        prober.start()
        time.sleep(2)

        # Cancel the target, still prefilling, and count the engine steps until its pages are
        # back (the server counts it as cancelled when the engine has freed them).
        before = scrape(mport)
        c0, s0 = cancelled(before), steps(before)
        t0 = time.perf_counter()
        target.cancel()
        m = before
        while cancelled(m) <= c0 and time.perf_counter() - t0 < 120:
            time.sleep(0.01)
            m = scrape(mport)
        back_s = time.perf_counter() - t0
        back_steps = steps(m) - s0
        print(f"cancel: pages back after {back_s * 1e3:.0f} ms, {back_steps:.0f} engine step(s) completed "
              f"since the last scrape before it; {m.get('kvserve_num_requests_running')} running")
        if cancelled(m) <= c0:
            failures.append("the cancelled stream was never counted as cancelled")
        elif back_steps > 2:
            failures.append(f"the cancel took {back_steps:.0f} engine steps to free its pages (want <= 2)")

        prober.join()
        latencies.sort()
        p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
        m = scrape(mport)
        step_count = steps(m)
        prefill_steps = m.get('kvserve_step_duration_seconds_count{phase="prefill"}', 0)
        mean_step = m.get('kvserve_step_duration_seconds_sum{phase="prefill"}', 0) / max(1, prefill_steps)
        print(f"health: {len(latencies)} checks, p50 {statistics.median(latencies) * 1e3:.1f} ms, "
              f"p99 {p99 * 1e3:.1f} ms, max {latencies[-1] * 1e3:.1f} ms; {step_count:.0f} steps, "
              f"mean prefill step {mean_step:.2f} s, running {m.get('kvserve_num_requests_running')}")
        if p99 >= 0.100:
            failures.append(f"health p99 {p99 * 1e3:.1f} ms under load (want < 100 ms)")
        if mean_step < 0.2:
            failures.append(f"mean prefill step {mean_step:.3f} s: the load was too light to prove anything")
        for t in threads:
            t.join(timeout=600)
        end_m = scrape(mport)
        if end_m.get("kvserve_kv_pages_used", -1) != 0:
            failures.append(f"{end_m.get('kvserve_kv_pages_used')} pages still used at the end")
    finally:
        server.terminate()
        server.wait(timeout=60)
    for f in failures:
        print("FAIL", f)
    print("ok" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
