"""The summary of a run under vLLM bench serve's result names (so tools that read its JSON read
ours): counts, throughputs, goodput, and {mean,median,std,p50,p90,p95,p99}_{ttft,tpot,itl,e2el}_ms;
then kvserve's own: rejections, per-request KV figures, needle hits."""
import statistics

PERCENTILES = (50, 90, 95, 99)
METRICS = ("ttft", "tpot", "itl", "e2el")


def percentile(values, p):
    """Linear interpolation between closest ranks (numpy's default), without numpy."""
    if not values:
        return 0.0
    v = sorted(values)
    k = (len(v) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def tpot(r):
    """Time per output token after the first, seconds; None for one-token outputs."""
    return (r.e2el - r.ttft) / (r.output_len - 1) if r.output_len > 1 else None


def parse_goodput(specs):
    """['ttft:500', 'tpot:50'] -> {'ttft': 500.0, 'tpot': 50.0} (milliseconds)."""
    slo = {}
    for spec in specs or []:
        name, _, ms = spec.partition(":")
        if name not in ("ttft", "tpot", "e2el") or not ms:
            raise SystemExit(f"kvload: --goodput takes ttft:MS tpot:MS e2el:MS, not {spec!r}")
        slo[name] = float(ms)
    return slo


def meets(r, slo):
    values = {"ttft": r.ttft, "tpot": tpot(r) or 0.0, "e2el": r.e2el}
    return all(values[k] * 1e3 <= ms for k, ms in slo.items())


def summarize(records, duration, slo):
    done = [r for r in records if r.ok]
    series = {"ttft": [r.ttft for r in done], "tpot": [t for t in map(tpot, done) if t is not None],
              "itl": [x for r in done for x in r.itls], "e2el": [r.e2el for r in done]}
    total_in = sum(r.prompt_len for r in done)
    total_out = sum(r.output_len for r in done)
    out = {
        "duration": duration,
        "completed": len(done),
        "failed": len(records) - len(done),
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": len(done) / duration,
        "request_goodput": (sum(meets(r, slo) for r in done) / duration) if slo else None,
        "output_throughput": total_out / duration,
        "total_token_throughput": (total_in + total_out) / duration,
    }
    for m in METRICS:
        ms = [x * 1e3 for x in series[m]]
        out[f"mean_{m}_ms"] = statistics.fmean(ms) if ms else 0.0
        out[f"median_{m}_ms"] = statistics.median(ms) if ms else 0.0
        out[f"std_{m}_ms"] = statistics.pstdev(ms) if ms else 0.0
        for p in PERCENTILES:
            out[f"p{p}_{m}_ms"] = percentile(ms, p)
    return out


def kvserve_fields(records):
    codes = {}
    for r in records:
        if not r.ok:
            codes[r.error_code] = codes.get(r.error_code, 0) + 1
    done = [r for r in records if r.ok]
    needles = [r for r in done if r.needle_found is not None]
    return {
        "rejected": codes.get("RESOURCE_EXHAUSTED", 0),
        "timed_out": codes.get("DEADLINE_EXCEEDED", 0),
        "errors_by_code": codes,
        "max_peak_kv_bytes": max((r.peak_kv_bytes for r in done), default=0),
        "mean_peak_kv_bytes": statistics.fmean([r.peak_kv_bytes for r in done]) if done else 0.0,
        "mean_kv_tokens_kept": statistics.fmean([r.kv_tokens_kept for r in done]) if done else 0.0,
        "total_kv_entries_evicted": sum(r.kv_entries_evicted for r in done),
        "needle_total": len(needles),
        "needle_found": sum(r.needle_found for r in needles),
    }


def per_request(records, detailed):
    """Per-request lists in request order of sending (vLLM's names for the ones it has); the
    latencies in seconds as vLLM saves them."""
    rs = sorted(records, key=lambda r: r.start)
    out = {"input_lens": [r.prompt_len for r in rs], "output_lens": [r.output_len for r in rs],
           "ttfts": [r.ttft if r.ok else 0.0 for r in rs], "itls": [r.itls for r in rs],
           "e2els": [r.e2el for r in rs], "start_times": [r.start for r in rs], "kinds": [r.kind for r in rs],
           "success": [r.ok for r in rs], "error_codes": [r.error_code for r in rs],
           "peak_kv_bytes": [r.peak_kv_bytes for r in rs], "kv_tokens_kept": [r.kv_tokens_kept for r in rs],
           "kv_entries_evicted": [r.kv_entries_evicted for r in rs]}
    if detailed:
        out["generated_texts"] = [r.text for r in rs]
        out["errors"] = [r.error for r in rs]
    return out
