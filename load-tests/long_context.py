#!/usr/bin/env python3
"""Long-context load test: one 128K-token prompt through `kvserve serve` while short requests
keep arriving, the way a shared server sees it.

What it runs, against one server it starts (SmolLM2 by default, --kv-dtype f16):
  1. short requests alone (`kvctl bench --stream`): time to first token and latency;
  2. a --tokens-long passkey haystack (`kvctl generate --prompt-file`, compressed per chunk
     so its KV stays bounded) and, while its prefill runs, the same short requests again;
  3. the same long prompt with the full cache and the server's --kv-memory too small for it:
     it must be refused with RESOURCE_EXHAUSTED naming the pages, and the server keep serving.
It prints one JSON line per phase and a summary, and exits non-zero when a request fails,
the long request's KV peak is not bounded by its budget, or the server stops serving.

SmolLM2 was trained on 8K tokens, so at 128K (run past it with --max-context) its answer
means nothing; this test measures capacity, memory and latency under load, not retrieval
(docs/QUALITY.md measures retrieval).

With --peer-llama-server BIN, phases 1 and 2 run again on llama.cpp's llama-server (same model,
threads, requests and prompt; one slot per client plus one for the long prompt) and the summary
gives peer/kvserve ratios. llama.cpp has no KV compression, so compare it with --policy full
at a length it can prefill in reasonable time (e.g. --tokens 16384).

Usage: load-tests/long_context.py [--build build] [--model models/SmolLM2-135M-Instruct.Q4_1.gguf]
         [--tokens 131072] [--budget 2048] [--policy snapkv|full] [--short-clients 2] [--short-requests 8]
         [--threads 2] [--peer-llama-server PATH] [--serve-flags "--decode-share 0"]
"""
import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

FILLER = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. "
NEEDLE = "The pass key is 71432. Remember it. 71432 is the pass key. "
QUESTION = "What is the pass key? The pass key is"
SHORT_PROMPT = "Write one sentence about the sea."


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(cmd, timeout=None):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def count_tokens(kvctl, addr, text):
    rc, out, err = run([kvctl, "tokenize", "--addr", addr, "--text", text])
    if rc != 0:
        sys.exit(f"kvctl tokenize failed: {err}")
    return len(re.findall(r"-?\d+", out))


def write_haystack(path, kvctl, addr, tokens):
    """A passkey haystack of about `tokens` tokens, the needle at half depth."""
    per_filler = count_tokens(kvctl, addr, FILLER.strip())
    fixed = count_tokens(kvctl, addr, NEEDLE.strip()) + count_tokens(kvctl, addr, QUESTION)
    reps = max(2, (tokens - fixed) // per_filler)
    text = FILLER * (reps // 2) + NEEDLE + FILLER * (reps - reps // 2) + QUESTION
    with open(path, "w") as f:
        f.write(text)


def model_info(kvctl, addr):
    rc, out, err = run([kvctl, "info", "--addr", addr])
    if rc != 0:
        sys.exit(f"kvctl info failed: {err}")
    return {k: int(v) for k, v in re.findall(r"^(\w+): (\d+)$", out, re.M)}


def metrics(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            try:
                out[key] = float(value)
            except ValueError:
                pass
    return out


def parse_usage(stderr):
    m = re.search(r"finish=(\S+) prompt_tokens=(\d+) generated_tokens=(\d+) kv_tokens_kept=(\d+) "
                  r"peak_kv_bytes=(\d+) queue=([\d.]+)s ttft=([\d.]+)s total=([\d.]+)s", stderr)
    if not m:
        return None
    keys = ["finish", "prompt_tokens", "generated_tokens", "kv_tokens_kept", "peak_kv_bytes", "queue_s",
            "ttft_s", "total_s"]
    vals = [m.group(1)] + [int(m.group(i)) for i in range(2, 6)] + [float(m.group(i)) for i in range(6, 9)]
    return dict(zip(keys, vals))


def short_bench(kvctl, addr, clients, requests, warmup):
    rc, out, err = run([kvctl, "bench", "--addr", addr, "--stream", "--clients", str(clients), "--requests",
                        str(requests), "--warmup", str(warmup), "--prompt", SHORT_PROMPT, "--max-new-tokens", "16",
                        "--ignore-eos", "--deadline", "0"])
    fields = dict(kv.split("=", 1) for kv in out.split() if "=" in kv)
    return rc, {k: float(v) for k, v in fields.items() if k.endswith("_ms") or k in ("req/s", "errors")}, err


def stop(server):
    server.terminate()
    try:
        server.wait(timeout=60)
    except subprocess.TimeoutExpired:
        server.kill()


def run_peer(a, haystack):
    """Phases 1 and 2 against llama-server (llama_server_peer.py): the same short requests, idle and
    during the same long prompt, which llama.cpp keeps in a full fp16 cache."""
    import llama_server_peer as peer
    port = free_port()
    log = tempfile.NamedTemporaryFile("w+", suffix=".peer.log", delete=False)
    server = peer.start(a.peer_llama_server, a.model, port, a.tokens + 512, a.short_clients + 1, a.threads, log)
    try:
        idle = peer.short_bench(port, SHORT_PROMPT, a.short_clients, a.short_requests, warmup=True)
        print(json.dumps({"phase": "peer llama-server: short requests, idle server", **idle}), flush=True)
        text = open(haystack).read()
        result = {}
        long_thread = threading.Thread(
            target=lambda: result.update(zip(("ok", "ttft_s", "total_s", "text", "last"), peer.completion(port, text, 16))))
        long_thread.start()
        time.sleep(5)
        busy_start = time.time()
        busy = peer.short_bench(port, SHORT_PROMPT, a.short_clients, a.short_requests, warmup=False)
        busy["long_prefill_running_at_end"] = long_thread.is_alive()
        busy["seconds"] = round(time.time() - busy_start, 1)
        print(json.dumps({"phase": f"peer llama-server: short requests during the {a.tokens}-token prefill", **busy}),
              flush=True)
        long_thread.join()
        timings = result.get("last", {}).get("timings", {})
        long_phase = {"phase": f"peer llama-server: {a.tokens}-token prompt, full fp16 cache", "ok": result.get("ok"),
                      "ttft_s": round(result.get("ttft_s", -1), 3), "total_s": round(result.get("total_s", -1), 3),
                      "prompt_tokens": timings.get("prompt_n"),
                      "prefill_tok_s": round(timings["prompt_per_second"], 1) if "prompt_per_second" in timings else None}
        print(json.dumps(long_phase), flush=True)
        return idle, busy, long_phase
    finally:
        stop(server)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--model", default="models/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--tokens", type=int, default=131072)
    ap.add_argument("--budget", type=int, default=2048, help="KV entries kept per layer (tokens)")
    ap.add_argument("--policy", default="snapkv", help="the long request's --kv-policy (full: no compression)")
    ap.add_argument("--kv-memory", default="1G")
    ap.add_argument("--short-clients", type=int, default=2)
    ap.add_argument("--short-requests", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2, help="CPU threads of each server")
    ap.add_argument("--peer-llama-server", help="a llama.cpp llama-server binary: run phases 1-2 on it too")
    ap.add_argument("--serve-flags", default="", help="more `kvserve serve` flags, e.g. '--decode-share 0'")
    a = ap.parse_args()
    kvserve, kvctl = os.path.join(a.build, "kvserve"), os.path.join(a.build, "kvctl")
    port, mport = free_port(), free_port()
    addr = f"127.0.0.1:{port}"
    log = tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False)
    server = subprocess.Popen([kvserve, "serve", "--model", a.model, "--port", str(port), "--metrics-port",
                               str(mport), "--max-context", str(a.tokens + 512), "--kv-dtype", "f16",
                               "--kv-memory", a.kv_memory, *a.serve_flags.split()], stdout=log, stderr=log,
                              env={**os.environ, "OMP_NUM_THREADS": str(a.threads)})
    failures = []
    compressed = a.policy != "full"
    try:
        for _ in range(600):
            if run([kvctl, "health", "--addr", addr])[1].strip() == "SERVING":
                break
            if server.poll() is not None:
                sys.exit(f"kvserve serve exited: {open(log.name).read()[-2000:]}")
            time.sleep(0.2)
        haystack = os.path.join(tempfile.mkdtemp(), "haystack.txt")
        write_haystack(haystack, kvctl, addr, a.tokens)
        print(json.dumps({"phase": "setup", "serve_flags": a.serve_flags, "haystack_bytes": os.path.getsize(haystack),
                          "kv_pages_total": metrics(mport).get("kvserve_kv_pages_total")}), flush=True)

        rc, idle, err = short_bench(kvctl, addr, a.short_clients, a.short_requests, warmup=1)
        print(json.dumps({"phase": "short requests, idle server", **idle}), flush=True)
        if rc != 0:
            failures.append(f"short requests on an idle server failed: {err}")

        long_cmd = [kvctl, "generate", "--addr", addr, "--deadline", "0", "--prompt-file", haystack,
                    "--max-new-tokens", "16", "--kv-policy", a.policy, "--usage"]
        if compressed:
            long_cmd += ["--kv-budget", str(a.budget), "--compress-at", "chunk"]
        result = {}
        started = time.time()
        long_thread = threading.Thread(target=lambda: result.update(zip(("rc", "out", "err"), run(long_cmd))))
        long_thread.start()
        time.sleep(5)  # the long prompt is tokenized and admitted; its prefill is under way
        # No warm-up call here: every request counted is one sent while the long prefill runs.
        busy_start = time.time()
        rc, busy, err = short_bench(kvctl, addr, a.short_clients, a.short_requests, warmup=0)
        busy["long_prefill_running_at_end"] = long_thread.is_alive()
        busy["seconds"] = round(time.time() - busy_start, 1)
        print(json.dumps({"phase": f"short requests during the {a.tokens}-token prefill", **busy}), flush=True)
        if rc != 0:
            failures.append(f"short requests during the long prefill failed: {err}")
        peak_rss = 0.0
        while long_thread.is_alive():
            m = metrics(mport)
            peak_rss = max(peak_rss, m.get("kvserve_process_resident_memory_bytes", 0.0))
            long_thread.join(timeout=2)
        usage = parse_usage(result.get("err", "")) or {}
        m = metrics(mport)
        what = f"{a.policy} budget {a.budget} per layer, chunk compression" if compressed else "full fp16 cache"
        long_phase = {"phase": f"{a.tokens}-token prompt, {what}",
                      "rc": result.get("rc"), "wall_s": round(time.time() - started, 1), **usage,
                      "answer": result.get("out", "").strip()[:80], "passkey_found": "71432" in result.get("out", ""),
                      "server_rss_peak_bytes": max(peak_rss, m.get("kvserve_process_peak_resident_memory_bytes", 0)),
                      "prefill_tok_s": round(usage["prompt_tokens"] / usage["ttft_s"], 1) if usage.get("ttft_s") else None}
        if result.get("rc") != 0 or not usage:
            failures.append(f"the long request failed: {result.get('err', '')[-500:]}")
        elif compressed:
            # Bounded KV, whatever the prompt length: per layer, the budget plus one prefill chunk
            # (512) in pages, and a page of slack; an fp16 K and V and an fp32 log-weight per entry.
            info = model_info(kvctl, addr)
            page = info["kv_page_size"]
            pages_per_layer = -(-(a.budget + 512) // page) + 1
            bound = info["n_layers"] * pages_per_layer * page * info["n_kv_heads"] * (info["head_dim"] * 4 + 4)
            long_phase["kv_bound_bytes"] = bound
            if usage["peak_kv_bytes"] > bound:
                failures.append(f"peak KV {usage['peak_kv_bytes']} B exceeds the bounded-cache limit {bound} B")
        print(json.dumps(long_phase), flush=True)

        if compressed:
            rc, out, err = run([kvctl, "generate", "--addr", addr, "--deadline", "0", "--prompt-file", haystack,
                                "--max-new-tokens", "16", "--kv-policy", "full"])
            refused = rc != 0 and "RESOURCE_EXHAUSTED" in err and "KV pages" in err
            print(json.dumps({"phase": "same prompt, full cache, too big for --kv-memory", "rc": rc, "refused": refused,
                              "message": err.strip()[-200:]}), flush=True)
            if not refused:
                failures.append(f"the full-cache request was not refused with RESOURCE_EXHAUSTED: rc={rc} {err[-300:]}")
        health = run([kvctl, "health", "--addr", addr])[1].strip()
        if health != "SERVING":
            failures.append(f"server health after the test: {health}")
    finally:
        stop(server)
    summary = {"phase": "summary", "server_health": health, "failures": failures}
    if a.peer_llama_server:
        p_idle, p_busy, p_long = run_peer(a, haystack)
        ratio = lambda x, y: round(x / y, 2) if x and y else None
        summary["peer_over_kvserve"] = {
            "short_ttft_p50_idle": ratio(p_idle["ttft_p50_ms"], idle["ttft_p50_ms"]),
            "short_ttft_p50_during_long_prefill": ratio(p_busy["ttft_p50_ms"], busy["ttft_p50_ms"]),
            "short_latency_p50_during_long_prefill": ratio(p_busy["p50_ms"], busy["p50_ms"]),
            "long_prompt_ttft": ratio(p_long["ttft_s"], usage.get("ttft_s"))}
    print(json.dumps(summary), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
