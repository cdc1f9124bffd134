#!/usr/bin/env python3
"""Batch-1 decode against the machine's streaming read rate, alternated in one run.

Each round reads a 1 GiB buffer (tests/bench/stream_bandwidth_bench.cc; plain loads and with a
non-temporal prefetch ahead, the faster of the two is the round's roofline rate), then runs
`kvserve bench` at --prompt-tokens, which reports the bytes a decode step reads and the rate
its decode steps achieved. The fraction is decode's read rate over the stream rate of the same
round: on a shared VM both swing with the host's load, so only same-round ratios are compared.
    python3 scripts/decode_roofline.py --model models/SmolLM2-135M-Instruct.Q4_1.gguf --rounds 5
"""
import argparse
import json
import re
import statistics
import subprocess


def stream_gb_s(bench):
    out = subprocess.run([bench, '--benchmark_filter=MiB:1024/', '--benchmark_format=json'],
                         capture_output=True, text=True, check=True).stdout
    rates = {}
    for b in json.loads(out)['benchmarks']:
        prefetch = int(re.search(r'prefetch:(\d+)', b['name']).group(1))
        rates[prefetch] = b['bytes_per_second'] / 1e9
    return rates


def decode(kvserve, model, tokens, new_tokens, repeats):
    out = subprocess.run([kvserve, 'bench', '--model', model, '--prompt-tokens', str(tokens), '--new-tokens',
                          str(new_tokens), '--repeats', str(repeats)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--model', required=True)
    ap.add_argument('--kvserve', default='build/kvserve')
    ap.add_argument('--stream-bench', default='build/tests/bench/kvserve_stream_bandwidth_bench')
    ap.add_argument('--prompt-tokens', type=int, default=4096)
    ap.add_argument('--new-tokens', type=int, default=64)
    ap.add_argument('--repeats', type=int, default=2, help='kvserve bench repeats per round (best of)')
    ap.add_argument('--rounds', type=int, default=5)
    args = ap.parse_args()
    fractions = []
    print('| round | stream 1 GiB plain / prefetched | decode tok/s | MB per step | decode reads | fraction |')
    print('|---|---|---:|---:|---:|---:|')
    for r in range(1, args.rounds + 1):
        s = stream_gb_s(args.stream_bench)
        roof = max(s.values())
        d = decode(args.kvserve, args.model, args.prompt_tokens, args.new_tokens, args.repeats)
        frac = d['decode_read_gb_s'] / roof
        fractions.append(frac)
        print('| %d | %.1f / %.1f GB/s | %.1f | %.1f | %.1f GB/s | %.0f%% |' % (
            r, s[0], max(v for k, v in s.items() if k), d['decode_tok_s'], d['decode_bytes_per_step'] / 1e6,
            d['decode_read_gb_s'], 100 * frac), flush=True)
    print('median fraction %.0f%%, range %.0f-%.0f%% over %d rounds' % (
        100 * statistics.median(fractions), 100 * min(fractions), 100 * max(fractions), len(fractions)))


if __name__ == '__main__':
    main()
