#!/usr/bin/env python3
"""The cost of kvserve's OpenAI-compatible HTTP API against its gRPC API: one `kvserve serve`
with both ports, the same kvload workload sent through each in alternation (so a neighbour's load
on a shared machine hits both alike), and a table of medians over the rounds with the ratio
HTTP / gRPC. With --llama-server BINARY, llama.cpp's server on the same GGUF gets the same
workload through its /completion endpoint and its OpenAI /v1/completions in the same rounds.

  python3 load-tests/http_vs_grpc.py build/kvserve models/SmolLM2-135M-Instruct.Q4_1.gguf \\
      --rounds 3 -- --dataset short --num-prompts 40 --input-len 64 --output-len 32 --max-concurrency 4

Arguments after -- go to every kvload run. Needs the kvload venv (load-tests/setup-venv.sh)."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
METRICS = [("mean_ttft_ms", "mean TTFT ms"), ("p99_ttft_ms", "p99 TTFT ms"), ("mean_tpot_ms", "mean TPOT ms"),
           ("mean_e2el_ms", "mean E2E ms"), ("request_throughput", "requests/s"), ("output_throughput", "output tok/s")]


def wait_ports(path, proc, keys):
    for _ in range(1200):
        try:
            ports = dict(line.split("=") for line in open(path).read().split())
            if all(k in ports for k in keys):
                return ports
        except (OSError, ValueError):
            pass
        if proc.poll() is not None:
            sys.exit(f"the server exited with {proc.returncode}")
        time.sleep(0.1)
    sys.exit("the server did not write its ports")


def kvload(work, name, backend, addr, extra):
    out = os.path.join(work, f"{name}.json")
    cmd = [sys.executable, os.path.join(HERE, "kvload.py"), "--backend", backend, "--addr", addr, "--save-result",
           "--save-detailed", "--result-dir", work, "--result-filename", f"{name}.json", *extra]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(out) as f:
        r = json.load(f)
    if r["failed"]:  # counted in the table; the medians are over the requests that completed
        errors = sorted({e for e in r.get("errors", []) if e})[:2]
        print(f"{name}: {r['failed']} requests failed: {r.get('errors_by_code')} {errors}", file=sys.stderr)
    return r


def start_llama_server(binary, model, port, threads, log):
    cmd = [binary, "-m", model, "--port", str(port), "-t", str(threads), "-c", "8192", "--parallel", "4",
           "--cont-batching"]
    proc = subprocess.Popen(cmd, stdout=log, stderr=log)
    import urllib.request
    for _ in range(600):
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).status == 200:
                return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    sys.exit("llama-server did not become healthy")


def main():
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kvserve")
    ap.add_argument("model")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kv-memory", default="512M")
    ap.add_argument("--threads", default=str(os.cpu_count()), help="OMP_NUM_THREADS / llama-server -t")
    ap.add_argument("--llama-server", help="llama.cpp's llama-server binary: add it to every round")
    a = ap.parse_args(argv)
    work = tempfile.mkdtemp(prefix="http-vs-grpc-")
    env = {**os.environ, "OMP_NUM_THREADS": a.threads}
    log = open(os.path.join(work, "server.log"), "w")
    server = subprocess.Popen([a.kvserve, "serve", "--model", a.model, "--host", "127.0.0.1", "--port", "0",
                               "--metrics-port", "-1", "--http-port", "0", "--port-file", os.path.join(work, "ports"),
                               "--kv-memory", a.kv_memory], stderr=log, env=env)
    peer = None
    try:
        ports = wait_ports(os.path.join(work, "ports"), server, ["grpc", "http"])
        configs = [("kvserve-grpc", "kvserve", f"127.0.0.1:{ports['grpc']}"),
                   ("kvserve-http", "openai", f"127.0.0.1:{ports['http']}")]
        if a.llama_server:
            peer = start_llama_server(a.llama_server, a.model, 18431, a.threads, log)
            configs += [("llama-server", "llama-server", "127.0.0.1:18431"),
                        ("llama-server-openai", "openai", "127.0.0.1:18431")]
        for name, backend, addr in configs:
            kvload(work, f"warmup-{name}", backend, addr, extra)
        results = {name: [] for name, _, _ in configs}
        for rnd in range(a.rounds):
            for name, backend, addr in configs:
                results[name].append(kvload(work, f"{name}-{rnd}", backend, addr, extra))
                print(f"round {rnd} {name}: " + ", ".join(f"{k}={results[name][-1][k]:.2f}" for k, _ in METRICS),
                      file=sys.stderr, flush=True)
        med = {name: {k: statistics.median(r[k] for r in rs) for k, _ in METRICS} for name, rs in results.items()}
        names = [n for n, _, _ in configs]
        print("| metric (median of %d rounds) | %s | HTTP / gRPC |" % (a.rounds, " | ".join(names)))
        print("|---" * (len(names) + 2) + "|")
        for k, label in METRICS:
            ratio = med["kvserve-http"][k] / med["kvserve-grpc"][k] if med["kvserve-grpc"][k] else float("nan")
            print(f"| {label} | " + " | ".join(f"{med[n][k]:.2f}" for n in names) + f" | {ratio:.3f} |")
        print("| failed requests (all rounds) | " + " | ".join(str(sum(r["failed"] for r in results[n])) for n in names)
              + " | |")
    finally:
        server.terminate()
        server.wait()
        if peer:
            peer.terminate()
            peer.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
