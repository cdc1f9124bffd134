#!/usr/bin/env python3
"""kvload: an open-loop load generator for kvserve (gRPC) and, for side-by-side runs, any
OpenAI-compatible server (kvserve's own --http-port, vLLM, llama-server's /v1) and llama.cpp's
llama-server (HTTP /completion), with results saved under vLLM bench serve's JSON names.

  python3 load-tests/kvload.py --addr 127.0.0.1:50051 --metrics-addr 127.0.0.1:9400 \
      --dataset bimodal --request-rate 2 --num-prompts 200 --goodput ttft:2000 tpot:100 \
      --save-result --result-dir results --metadata run=hol

Requests arrive as a Poisson process at --request-rate (gamma with --burstiness), up to
--max-concurrency in flight, until --num-prompts are sent or --duration has passed. Every
request is streamed; RESOURCE_EXHAUSTED and other failures are counted, never fatal. While it
runs, /metrics is scraped into a time series and a progress line is printed at least every 10 s.
Needs `pip install -r load-tests/requirements.txt load-tests/kvserve_client` (README.md)."""
import argparse
import asyncio
import datetime
import json
import math
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loadgen import backends, datasets, scrape, stats, tokenizers  # noqa: E402
from loadgen.runner import Run  # noqa: E402


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_argument_group("server")
    g.add_argument("--backend", choices=["kvserve", "openai", "llama-server"], default="kvserve",
                   help="kvserve: gRPC; openai: POST /v1/completions (streamed) and vLLM's /tokenize")
    g.add_argument("--addr", required=True, help="kvserve's gRPC HOST:PORT, or the HTTP server's HOST:PORT")
    g.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY"),
                   help="openai: the bearer token (default $OPENAI_API_KEY)")
    g.add_argument("--metrics-addr", help="kvserve's /metrics HOST:PORT, scraped during the run")
    g.add_argument("--scrape-interval", type=float, default=1.0, help="seconds between /metrics scrapes")
    g.add_argument("--max-context", type=int, default=8192, help="llama-server only: its context per slot")
    g.add_argument("--wait-ready", type=float, default=120, help="seconds to wait for a server still loading")
    g = ap.add_argument_group("arrivals")
    g.add_argument("--request-rate", type=float, default=math.inf, help="requests/s (Poisson); inf sends all at once")
    g.add_argument("--burstiness", type=float, default=1.0, help="gamma shape of the gaps; 1 = Poisson, <1 burstier")
    g.add_argument("--max-concurrency", type=int, help="most requests in flight; later arrivals wait for a slot")
    g.add_argument("--num-prompts", type=int, default=100)
    g.add_argument("--duration", type=float, help="stop sending after this many seconds")
    g.add_argument("--seed", type=int, default=0)
    g = ap.add_argument_group("dataset")
    g.add_argument("--dataset", choices=["short", "long", "bimodal", "needle"], default="short")
    g.add_argument("--corpus", help="a folder of *.txt (default: tests/data/corpus)")
    g.add_argument("--input-len", type=int, default=128, help="short prompts' tokens (the distribution's centre)")
    g.add_argument("--output-len", type=int, default=64, help="tokens to generate")
    g.add_argument("--long-len", type=int, default=8192, help="long prompts' tokens")
    g.add_argument("--long-fraction", type=float, default=0.1, help="bimodal: share of long prompts")
    g.add_argument("--needle-lengths", default="8192,16384,32768,65536,131072",
                   help="needle: comma-separated prompt tokens, cycled")
    g.add_argument("--needle-output-len", type=int, default=16)
    g.add_argument("--len-dist", choices=["fixed", "uniform", "lognormal"], default="lognormal")
    g.add_argument("--range-ratio", type=float, default=0.5, help="uniform: lengths in mean*(1 +- r)")
    g.add_argument("--no-chat", dest="chat", action="store_false", help="short prompts without the chat template")
    g.add_argument("--no-ignore-eos", dest="ignore_eos", action="store_false",
                   help="stop at EOS (by default every request generates its full output)")
    g = ap.add_argument_group("per-request KV cache (kvserve)")
    g.add_argument("--kv-policy")
    g.add_argument("--kv-budget", type=float)
    g.add_argument("--compress-at", choices=["prefill_end", "chunk"])
    g.add_argument("--budget-plan")
    g.add_argument("--chunk-scoring", choices=["question", "window"], help="chunk mode: what scores a mid-prompt chunk")
    g.add_argument("--kv-min-tokens", type=int, default=0,
                   help="apply the KV flags only to prompts of at least this many tokens")
    g = ap.add_argument_group("results")
    g.add_argument("--request-timeout", type=float, default=600.0, help="seconds per request")
    g.add_argument("--goodput", nargs="+", metavar="KEY:MS", help="SLOs for request_goodput: ttft:MS tpot:MS e2el:MS")
    g.add_argument("--save-result", action="store_true")
    g.add_argument("--save-detailed", action="store_true", help="also each request's text and error")
    g.add_argument("--result-dir", default=".")
    g.add_argument("--result-filename")
    g.add_argument("--label", help="the configuration's name in reports (default: the backend)")
    g.add_argument("--metadata", nargs="+", default=[], metavar="K=V", help="extra keys saved in the result")
    g.add_argument("--progress-interval", type=float, default=10.0, help="seconds between progress lines (<= 10)")
    a = ap.parse_args(argv)
    a.needle_lengths = [int(x) for x in a.needle_lengths.split(",") if x]
    a.progress_interval = min(a.progress_interval, 10.0)
    a.slo = stats.parse_goodput(a.goodput)
    return a


def kv_params(a):
    kv = {"policy": a.kv_policy, "budget": a.kv_budget, "compress_at": a.compress_at, "budget_plan": a.budget_plan,
          "chunk_scoring": a.chunk_scoring}
    kv = {k: v for k, v in kv.items() if v is not None}
    return lambda prompt: kv if kv and len(prompt.token_ids) >= a.kv_min_tokens else None


def make_backend(a):
    if a.backend == "kvserve":
        from kvserve_client import Client, Unavailable
        client = Client(a.addr, timeout=120)
        for attempt in range(int(a.wait_ready * 2) + 1):  # a server that is still loading its model
            try:
                client.model_info()
                break
            except Unavailable:
                if attempt >= a.wait_ready * 2:
                    raise
                time.sleep(0.5)
        tok = tokenizers.KvserveTokenizer(client)
        return backends.KvserveBackend(a.addr, a.request_timeout), tok
    url = f"http://{a.addr}"
    if a.backend == "openai":
        for attempt in range(int(a.wait_ready * 2) + 1):  # 503 while the model loads
            try:
                tok = tokenizers.OpenAiServerTokenizer(url, a.api_key, a.max_context)
                break
            except OSError:
                if attempt >= a.wait_ready * 2:
                    raise
                time.sleep(0.5)
        return backends.OpenAiBackend(url, a.request_timeout, tok.model_id, a.api_key), tok
    return backends.LlamaServerBackend(url, a.request_timeout), tokenizers.LlamaServerTokenizer(url, a.max_context)


def result_json(a, run, records, tok, scraper):
    out = {"date": datetime.datetime.now().strftime("%Y%m%d-%H%M%S"), "backend": a.backend,
           "label": a.label or a.backend, "model_id": tok.model_id, "tokenizer_id": tok.model_id,
           "dataset_name": a.dataset, "num_prompts": len(records),
           # "inf" as a string, as vLLM saves it: JSON has no infinity
           "request_rate": "inf" if math.isinf(a.request_rate) else a.request_rate,
           "burstiness": a.burstiness, "max_concurrency": a.max_concurrency,
           "kv_policy": a.kv_policy, "kv_budget": a.kv_budget, "compress_at": a.compress_at,
           "chunk_scoring": a.chunk_scoring,
           "goodput_slo_ms": a.slo or None}
    for kv in a.metadata:
        k, _, v = kv.partition("=")
        out[k] = v
    out.update(stats.summarize(records, run.duration, a.slo))
    out["max_concurrent_requests"] = run.max_in_flight
    out.update(stats.kvserve_fields(records))
    samples = scraper.samples
    out["kv_pool_bytes"] = scraper.pool_bytes()
    out["peak_server_kv_bytes"] = max((s.get("kv_bytes_used", 0) for s in samples), default=None)
    out["peak_server_rss_bytes"] = max((s.get("rss_bytes", 0) for s in samples), default=None)
    out["metrics_timeseries"] = samples
    out.update(stats.per_request(records, a.save_detailed))
    return out


def file_name(a, res):
    if a.result_filename:
        return a.result_filename
    rate = "inf" if math.isinf(a.request_rate) else f"{a.request_rate:g}"
    model = os.path.basename(str(res["model_id"])).replace(":", "-")
    return f"{res['label']}-{a.dataset}-{rate}qps-concurrency{a.max_concurrency}-{model}-{res['date']}.json"


async def main_async(a):
    backend, tok = make_backend(a)
    prompts = datasets.Builder(tok, a).build(a.num_prompts)
    random.Random(a.seed).shuffle(prompts)  # bimodal: long prompts spread over the run
    print(f"[kvload] {len(prompts)} {a.dataset} prompts, {sum(len(p.token_ids) for p in prompts)} tokens, "
          f"rate {a.request_rate} req/s, max concurrency {a.max_concurrency}", file=sys.stderr, flush=True)
    scraper = scrape.Scraper(a.metrics_addr, a.scrape_interval)
    await backend.open()
    try:
        run = Run(backend, prompts, a, kv_params(a), scraper)
        records = await run.run()
    finally:
        await backend.close()
    return result_json(a, run, records, tok, scraper)


def main(argv=None):
    a = parse_args(argv)
    res = asyncio.run(main_async(a))
    summary = {k: v for k, v in res.items() if not isinstance(v, (list, dict))}
    print(json.dumps(summary, indent=1))
    if a.save_result:
        os.makedirs(a.result_dir, exist_ok=True)
        path = os.path.join(a.result_dir, file_name(a, res))
        with open(path, "w") as f:
            json.dump(res, f, allow_nan=False)
        print(f"[kvload] saved {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
