#!/usr/bin/env python3
"""Soak: mixed traffic against one `kvserve serve` for a long time, sampling what leaks.

Workers send, at random, unary and streamed generations, streams cancelled mid-way, calls
that time out, bad requests (unknown policy, out-of-range budget, empty prompt, a prompt over
the context) and tokenize/detokenize calls, over every KV policy and compress-at mode. A
sampler records the server's RSS and open file descriptors (/proc) and its KV pages
(/metrics). At the end, with the traffic stopped: every page must be back, and RSS and fds
must be flat after the warm-up (the first quarter): the median of the last quarter of samples
at most --rss-tolerance above the median of the second quarter.

Usage: soak.py KVSERVE --venv VENV [--minutes 30] [--workers 6] [--out soak.json]
  (VENV: load-tests/setup-venv.sh's). Exit status 0 when every check passed.
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

POLICIES = ["full", "streaming", "snapkv", "criticalkv", "pyramid", "keydiff", "mergereduce:random",
            "mergereduce:cluster"]
WORDS = "the quick brown fox jumps over a lazy dog while kv caches fill and drain".split()


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kvserve")
    p.add_argument("--venv", required=True)
    p.add_argument("--minutes", type=float, default=30)
    p.add_argument("--workers", type=int, default=6)
    p.add_argument("--sample-seconds", type=float, default=2)
    p.add_argument("--rss-tolerance", type=float, default=0.15, help="allowed RSS growth after warm-up (fraction)")
    p.add_argument("--rss-slack-mb", type=float, default=24, help="and absolute slack, for small servers")
    p.add_argument("--kv-memory", default="64M")
    p.add_argument("--out", default="")
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args()


def text(rng, n_words):
    return " ".join(rng.choice(WORDS) for _ in range(n_words))


def read_metrics(port):
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out = {}
    for line in body.splitlines():
        if line.startswith("kvserve_kv_pages_") or line.startswith("kvserve_num_requests_"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def proc_sample(pid):
    rss_kb = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss_kb = int(line.split()[1])
    return rss_kb / 1024.0, len(os.listdir(f"/proc/{pid}/fd"))


class Counts:
    def __init__(self):
        self.lock = threading.Lock()
        self.by_kind = {}

    def add(self, kind, outcome):
        with self.lock:
            k = f"{kind}:{outcome}"
            self.by_kind[k] = self.by_kind.get(k, 0) + 1


def one_call(c, rng, counts, errors):
    """One random call; records its kind and outcome. An outcome the kind does not allow is an error."""
    from kvserve_client import KvserveError, InvalidArgument, ResourceExhausted, DeadlineExceeded
    policy = rng.choice(POLICIES)
    kv = {"policy": policy}
    if policy != "full":
        kv["budget"] = rng.choice([0.2, 0.5, 24.0, 64.0])
        kv["compress_at"] = rng.choice(["prefill_end", "chunk"])
    prompt = text(rng, rng.randint(5, 300))
    kind = rng.choices(["unary", "stream", "cancel", "deadline", "bad", "tokenize"], [3, 3, 2, 1, 2, 1])[0]
    try:
        if kind == "unary":
            r = c.generate(prompt, max_new_tokens=rng.randint(1, 24), kv=kv, timeout=120)
            counts.add(kind, "ok" if r.token_ids else "empty")
        elif kind == "stream":
            n = sum(1 for _ in c.generate_stream(prompt, max_new_tokens=rng.randint(1, 24), kv=kv, timeout=120))
            counts.add(kind, "ok" if n >= 1 else "empty")
        elif kind == "cancel":
            stream = c.generate_stream(prompt, max_new_tokens=200, ignore_eos=True, kv=kv, timeout=120)
            for i, _ in enumerate(stream):
                if i >= rng.randint(0, 5):
                    break
            stream.close()  # cancels the call: the server must free its pages
            counts.add(kind, "ok")
        elif kind == "deadline":
            try:
                for _ in c.generate_stream(text(rng, 400), max_new_tokens=400, ignore_eos=True, kv=kv,
                                           timeout=rng.uniform(0.05, 0.5)):
                    pass
                counts.add(kind, "finished")
            except DeadlineExceeded:
                counts.add(kind, "deadline")
        elif kind == "bad":
            bad = rng.choice([
                dict(kv={"policy": "no-such-policy"}),
                dict(kv={"policy": "snapkv", "budget": 2.0 ** 63}),
                dict(kv={"policy": "snapkv", "budget": -1.0}),
                dict(kv={"policy": "mergereduce:random", "layer_budgets": [2 ** 40, 1]}),
                dict(sampling={"temperature": -1.0}),
                dict(token_ids=[10 ** 9]),
                dict(token_ids=list(range(20000))),  # over random:tiny's 4096-token context
            ])
            tokens = bad.pop("token_ids", None)
            try:
                if tokens is not None:
                    c.generate(token_ids=tokens, max_new_tokens=2, timeout=30, **bad)
                else:
                    c.generate(prompt, max_new_tokens=2, timeout=30, **bad)
                errors.append(f"a bad request went through: {bad} {tokens is not None}")
            except (InvalidArgument, ResourceExhausted):
                counts.add(kind, "refused")
        else:
            ids = c.tokenize(prompt, timeout=30)
            c.detokenize(ids, timeout=30)
            counts.add(kind, "ok")
    except ResourceExhausted:
        counts.add(kind, "queue_full")  # backpressure is allowed under load
    except KvserveError as e:
        errors.append(f"{kind} {policy}: {e}")


def main():
    args = parse_args()
    if os.path.realpath(sys.prefix) != os.path.realpath(args.venv):
        py = os.path.join(args.venv, "bin", "python")
        os.execv(py, [py] + sys.argv)
    from kvserve_client import Client

    work = tempfile.mkdtemp(prefix="kvserve-soak-")
    ports = os.path.join(work, "ports")
    log = open(os.path.join(work, "server.log"), "w")
    server = subprocess.Popen([args.kvserve, "serve", "--model", "random:tiny", "--host", "127.0.0.1", "--port", "0",
                               "--metrics-host", "127.0.0.1", "--metrics-port", "0", "--port-file", ports,
                               "--kv-memory", args.kv_memory], stderr=log)
    failures, errors = [], []
    samples = []
    try:
        deadline = time.time() + 60
        while not (os.path.exists(ports) and "metrics=" in open(ports).read()) and time.time() < deadline:
            time.sleep(0.1)
        port_text = open(ports).read()
        addr = "127.0.0.1:" + port_text.split("grpc=")[1].split()[0]
        metrics_port = int(port_text.split("metrics=")[1].split()[0])
        for _ in range(300):
            try:
                Client(addr, timeout=5).model_info()
                break
            except Exception:
                time.sleep(0.2)

        counts = Counts()
        stop = threading.Event()
        end = time.time() + args.minutes * 60

        def worker(i):
            rng = random.Random(args.seed * 1000 + i)
            with Client(addr, timeout=120) as c:
                while not stop.is_set() and time.time() < end:
                    one_call(c, rng, counts, errors)

        threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(args.workers)]
        t0 = time.time()
        for t in threads:
            t.start()
        while time.time() < end:
            rss, fds = proc_sample(server.pid)
            m = read_metrics(metrics_port)
            samples.append({"t": round(time.time() - t0, 1), "rss_mb": round(rss, 1), "fds": fds,
                            "pages_used": m.get("kvserve_kv_pages_used", -1),
                            "pages_reserved": m.get("kvserve_kv_pages_reserved", -1)})
            time.sleep(args.sample_seconds)
        stop.set()
        for t in threads:
            t.join(timeout=180)
        if any(t.is_alive() for t in threads):
            failures.append("a worker did not finish within 180 s of the end")

        # With the traffic stopped every page comes back (allow a few steps for the last cancels).
        settle = time.time() + 10
        m = read_metrics(metrics_port)
        while (m.get("kvserve_kv_pages_used") or m.get("kvserve_kv_pages_reserved")) and time.time() < settle:
            time.sleep(0.2)
            m = read_metrics(metrics_port)
        end_rss, end_fds = proc_sample(server.pid)
        if m.get("kvserve_kv_pages_used") != 0 or m.get("kvserve_kv_pages_reserved") != 0:
            failures.append(f"pages leaked: used {m.get('kvserve_kv_pages_used')}, "
                            f"reserved {m.get('kvserve_kv_pages_reserved')} with no traffic")
        q = max(1, len(samples) // 4)
        warm, last = samples[q:2 * q], samples[-q:]
        if len(samples) < 8:
            failures.append(f"only {len(samples)} samples: run longer")
        else:
            warm_rss = statistics.median(s["rss_mb"] for s in warm)
            last_rss = statistics.median(s["rss_mb"] for s in last)
            allowed = warm_rss * args.rss_tolerance + args.rss_slack_mb
            if last_rss - warm_rss > allowed:
                failures.append(f"RSS grew from {warm_rss:.1f} MB to {last_rss:.1f} MB after warm-up "
                                f"(allowed +{allowed:.1f} MB)")
            warm_fds = max(s["fds"] for s in warm)
            if end_fds > warm_fds + 8:
                failures.append(f"open fds grew from {warm_fds} to {end_fds} with no traffic")
        calls = sum(counts.by_kind.values())
        if calls < args.workers * args.minutes * 10:
            failures.append(f"only {calls} calls in {args.minutes} min: the server stalled")
        failures += errors[:20]
        summary = {
            "minutes": args.minutes, "workers": args.workers, "calls": calls, "by_kind": counts.by_kind,
            "errors": len(errors), "rss_mb": {"first": samples[0]["rss_mb"] if samples else None,
                                              "max": max((s["rss_mb"] for s in samples), default=None),
                                              "end": round(end_rss, 1)},
            "fds": {"first": samples[0]["fds"] if samples else None, "end": end_fds},
            "pages_used_max": max((s["pages_used"] for s in samples), default=None),
            "end_pages": {"used": m.get("kvserve_kv_pages_used"), "reserved": m.get("kvserve_kv_pages_reserved")},
            "failures": failures, "samples": samples,
        }
        if args.out:
            with open(args.out, "w") as f:
                json.dump(summary, f, indent=1)
        brief = {k: v for k, v in summary.items() if k != "samples"}
        print(json.dumps(brief, indent=1))
        if server.poll() is not None:
            failures.append(f"the server exited with {server.returncode}")
        for f in failures:
            print("FAIL", f)
        print("soak: ok" if not failures else f"soak: {len(failures)} failure(s)")
        return 1 if failures else 0
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            failures.append("the server ignored SIGTERM for 30 s")


if __name__ == "__main__":
    sys.exit(main())
