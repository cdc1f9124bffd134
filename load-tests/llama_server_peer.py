"""The peer for load-tests/long_context.py: llama.cpp's `llama-server`, driven through its HTTP
/completion endpoint with the same requests kvserve gets (a peer built outside the repo; this
file only talks to it). Short requests are streamed (server-sent events, one `data: {json}` line
per token with the text in "content"), so the time to the first token is measured the same way
`kvctl bench --stream` measures it: from sending the request to the first token's arrival."""
import http.client
import json
import subprocess
import threading
import time


def start(binary, model, port, n_ctx_per_slot, slots, threads, log):
    """llama-server with `slots` parallel sequences of n_ctx_per_slot tokens each (it splits
    --ctx-size evenly among them) and continuous batching, as kvserve batches."""
    cmd = [binary, "-m", model, "--port", str(port), "-t", str(threads), "-c", str(n_ctx_per_slot * slots),
           "--parallel", str(slots), "--cont-batching"]
    proc = subprocess.Popen(cmd, stdout=log, stderr=log)
    for _ in range(600):
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return proc
        except OSError:
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"llama-server exited with {proc.returncode}")
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError("llama-server did not become healthy in 120 s")


def completion(port, prompt, n_predict, timeout=None):
    """One streamed /completion; returns (ok, ttft_s, total_s, text, the last event)."""
    body = json.dumps({"prompt": prompt, "n_predict": n_predict, "stream": True, "ignore_eos": True,
                       "cache_prompt": False})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    start_t = time.monotonic()
    conn.request("POST", "/completion", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        return False, -1.0, time.monotonic() - start_t, resp.read().decode(errors="replace"), {}
    ttft, text, ok, event = -1.0, [], False, {}
    for raw in resp:
        line = raw.decode(errors="replace").strip()
        if not line.startswith("data:"):
            continue
        event = json.loads(line[5:])
        if event.get("content") and ttft < 0:
            ttft = time.monotonic() - start_t
        text.append(event.get("content", ""))
        if event.get("stop"):
            ok = True
            break
    conn.close()
    return ok, ttft, time.monotonic() - start_t, "".join(text), event


def short_bench(port, prompt, clients, requests, warmup, n_predict=16):
    """kvctl bench --stream's figures for llama-server: clients threads, requests in all, after one
    uncounted call when warmup (as kvctl bench --warmup 1)."""
    if warmup:
        completion(port, prompt, n_predict)
    next_i, lock, results = [0], threading.Lock(), []

    def client():
        while True:
            with lock:
                if next_i[0] >= requests:
                    return
                next_i[0] += 1
            r = completion(port, prompt, n_predict)
            with lock:
                results.append(r)

    t0 = time.monotonic()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.monotonic() - t0
    lat = sorted(r[2] for r in results)
    ttft = sorted(r[1] for r in results if r[1] >= 0)
    pct = lambda v, p: v[min(len(v) - 1, int(p * len(v)))] * 1e3 if v else 0.0
    return {"req/s": round(requests / seconds, 1), "p50_ms": round(pct(lat, 0.5), 2), "p99_ms": round(pct(lat, 0.99), 2),
            "ttft_p50_ms": round(pct(ttft, 0.5), 2), "ttft_p99_ms": round(pct(ttft, 0.99), 2),
            "errors": float(sum(1 for r in results if not r[0]))}
