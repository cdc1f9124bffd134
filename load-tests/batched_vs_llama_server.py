#!/usr/bin/env python3
"""Batched decode throughput, kvserve against llama.cpp's llama-server: B requests in flight at
once (B = 1, 8, 32 by default), the same prompts (plain text cut from the corpus, the same token
count on both), the same output length (ignore_eos), the same threads. llama-server gets
`--parallel B` (one slot per request) and continuous batching; kvserve batches on its own.
Rounds alternate the two servers, so a neighbour's load on a shared machine hits both alike.

Reported per B, medians over the rounds: aggregate decode tok/s (B / mean TPOT: the tokens per
second the whole batch gains while every request decodes), per-request TPOT, the end-to-end
output tok/s (prefills included) and the ratio kvserve / llama-server.

  python3 load-tests/batched_vs_llama_server.py build/kvserve models/SmolLM2-135M-Instruct.Q4_1.gguf \\
      --llama-server <llama.cpp>/build/bin/llama-server --batches 1,8,32 --rounds 2

Needs the kvload venv (load-tests/setup-venv.sh) as its Python, or kvload's dependencies."""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from http_vs_grpc import kvload, wait_ports  # noqa: E402
import llama_server_peer  # noqa: E402

sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
import launch_env  # noqa: E402


def decode_tok_s(result, batch):
    """The batch's decode rate: B requests each emitting one token every mean-TPOT ms."""
    return batch * 1000.0 / result["mean_tpot_ms"] if result["mean_tpot_ms"] else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kvserve")
    ap.add_argument("model")
    ap.add_argument("--llama-server", required=True, help="llama.cpp's llama-server binary")
    ap.add_argument("--batches", default="1,8,32", help="requests in flight at once, comma-separated")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--prompts-per-slot", type=int, default=2, help="requests sent per batch slot in a run")
    ap.add_argument("--input-len", type=int, default=64)
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--threads", default=str(os.cpu_count()), help="OMP_NUM_THREADS / llama-server -t")
    ap.add_argument("--kv-memory", default="1G")
    ap.add_argument("--port", type=int, default=18432, help="llama-server's port")
    launch_env.add_argument(ap)
    a = ap.parse_args()
    batches = [int(b) for b in a.batches.split(",")]
    work = tempfile.mkdtemp(prefix="batched-vs-llama-")
    log = open(os.path.join(work, "servers.log"), "w")
    env = launch_env.kvserve_env({**os.environ, "OMP_NUM_THREADS": a.threads}, a.kvserve_env)
    server = subprocess.Popen([a.kvserve, "serve", "--model", a.model, "--host", "127.0.0.1", "--port", "0",
                               "--metrics-port", "-1", "--port-file", os.path.join(work, "ports"),
                               "--kv-memory", a.kv_memory], stderr=log, env=env)
    rows = []
    try:
        kv_addr = f"127.0.0.1:{wait_ports(os.path.join(work, 'ports'), server, ['grpc'])['grpc']}"
        for b in batches:
            slot_ctx = a.input_len + a.output_len + 64
            peer = llama_server_peer.start(a.llama_server, a.model, a.port, slot_ctx, b, a.threads, log)
            try:
                def load(n):
                    return ["--dataset", "short", "--no-chat", "--len-dist", "fixed", "--input-len", str(a.input_len),
                            "--output-len", str(a.output_len), "--max-concurrency", str(b), "--num-prompts", str(n),
                            "--max-context", str(slot_ctx)]
                configs = [("kvserve", "kvserve", kv_addr), ("llama-server", "llama-server", f"127.0.0.1:{a.port}")]
                for name, backend, addr in configs:  # warm-up, not counted
                    kvload(work, f"warmup-{name}-{b}", backend, addr, load(b))
                got = {name: [] for name, _, _ in configs}
                for rnd in range(a.rounds):
                    for name, backend, addr in configs:
                        r = kvload(work, f"{name}-b{b}-{rnd}", backend, addr, load(b * a.prompts_per_slot))
                        got[name].append(r)
                        print(f"B={b} round {rnd} {name}: decode {decode_tok_s(r, b):.1f} tok/s, "
                              f"TPOT {r['mean_tpot_ms']:.1f} ms, output {r['output_throughput']:.1f} tok/s, "
                              f"failed {r['failed']}", file=sys.stderr, flush=True)
            finally:
                peer.terminate()
                peer.wait()
            med = {n: {"decode": statistics.median(decode_tok_s(r, b) for r in rs),
                       "tpot": statistics.median(r["mean_tpot_ms"] for r in rs),
                       "output": statistics.median(r["output_throughput"] for r in rs),
                       "failed": sum(r["failed"] for r in rs)} for n, rs in got.items()}
            rows.append((b, med))
    finally:
        server.terminate()
        server.wait()
    print(f"kvserve's OpenMP waiting: " + (" ".join(f"{v}={env[v]}" for v in launch_env.OPENMP_VARS if env.get(v))
                                            or "libgomp default"))
    print(f"threads={a.threads} input={a.input_len} output={a.output_len} rounds={a.rounds} "
          f"prompts per slot={a.prompts_per_slot}")
    print("| B | decode tok/s kvserve / llama-server | ratio | TPOT ms kvserve / llama-server | "
          "output tok/s (with prefill) kvserve / llama-server | ratio | failed |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for b, m in rows:
        k, p = m["kvserve"], m["llama-server"]
        print(f"| {b} | {k['decode']:.1f} / {p['decode']:.1f} | {k['decode'] / p['decode']:.2f} | "
              f"{k['tpot']:.1f} / {p['tpot']:.1f} | {k['output']:.1f} / {p['output']:.1f} | "
              f"{k['output'] / p['output']:.2f} | {k['failed']} / {p['failed']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
