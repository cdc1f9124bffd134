#!/usr/bin/env python3
"""Prefill and decode throughput of kvserve vs llama.cpp (llama-cpp-python) in the same run.

Both get the same GGUF, the same token ids, the same thread count; best of --repeats.
The peer is a PyPI package installed outside the repo (never linked into kvserve):
    python3 -m venv /opt/golden-venv && /opt/golden-venv/bin/pip install llama-cpp-python==0.3.36
    /opt/golden-venv/bin/python scripts/bench_vs_llama_cpp.py --model models/SmolLM2-135M-Instruct.Q4_1.gguf
"""
import argparse
import json
import os
import statistics
import subprocess
import time

import numpy as np

import launch_env


def load_llama_cpp(model, n_ctx, threads):
    import llama_cpp
    return llama_cpp.Llama(model_path=model, n_ctx=n_ctx, n_batch=512, n_threads=threads,
                           n_threads_batch=threads, verbose=False)


def bench_llama_cpp(llm, prompt, n_new, repeats):
    import llama_cpp
    best_p, best_d = 1e30, 1e30
    for _ in range(repeats):
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(prompt)
        t1 = time.perf_counter()
        for _ in range(n_new):
            ptr = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
            logits = np.ctypeslib.as_array(ptr, shape=(llm.n_vocab(),))
            llm.eval([int(logits.argmax())])
        t2 = time.perf_counter()
        best_p, best_d = min(best_p, t1 - t0), min(best_d, t2 - t1)
    return {"engine": "llama.cpp " + llama_cpp.__version__, "prefill_tok_s": len(prompt) / best_p,
            "decode_tok_s": n_new / best_d}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--kvserve", default="build/kvserve")
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--kv-dtype", choices=["f16", "f32"],
                    help="kvserve's K/V storage (default: kvserve's, f16 on the CPU like llama.cpp's)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="alternate the two engines this many times (each round: kvserve, then "
                         "llama.cpp, best of --repeats each) and report every round's ratio and the "
                         "median: on a shared VM the speed drifts within minutes")
    launch_env.add_argument(ap)
    a = ap.parse_args()
    vocab = 49152
    prompt = [(i * 7919 + 13) % vocab for i in range(a.prompt_tokens)]  # same ids as `kvserve bench`
    env = launch_env.kvserve_env(dict(os.environ, OMP_NUM_THREADS=str(a.threads), OPENBLAS_NUM_THREADS=str(a.threads)),
                                 a.kvserve_env)
    llm = load_llama_cpp(a.model, len(prompt) + a.new_tokens + 8, a.threads)
    print(f"threads={a.threads} prompt={a.prompt_tokens} new={a.new_tokens} repeats={a.repeats} "
          f"rounds={a.rounds} (llama.cpp stores f16 K/V)")
    print(f"{'round':<7}{'engine':<28}{'prefill tok/s':>15}{'decode tok/s':>15}")
    ratios = []
    for rnd in range(1, a.rounds + 1):
        ours = json.loads(subprocess.check_output(
            [a.kvserve, "bench", "--model", a.model, "--prompt-tokens", str(a.prompt_tokens),
             "--new-tokens", str(a.new_tokens), "--repeats", str(a.repeats)]
            + (["--kv-dtype", a.kv_dtype] if a.kv_dtype else []), env=env))
        ours["engine"] = f"kvserve ({ours.get('cpu_isa', '?')}, {ours.get('kv_dtype', '?')} K/V)"
        if rnd == 1:
            print(f"kvserve's OpenMP waiting: {ours.get('omp_wait', '?')}")
        peer = bench_llama_cpp(llm, prompt, a.new_tokens, a.repeats)
        for r in (ours, peer):
            print(f"{rnd:<7}{r['engine']:<28}{r['prefill_tok_s']:>15.1f}{r['decode_tok_s']:>15.1f}")
        ratios.append((ours["prefill_tok_s"] / peer["prefill_tok_s"], ours["decode_tok_s"] / peer["decode_tok_s"]))
        print(f"{rnd:<7}{'kvserve / llama.cpp':<28}{ratios[-1][0]:>15.2f}{ratios[-1][1]:>15.2f}")
    if a.rounds > 1:
        print(f"{'median':<7}{'kvserve / llama.cpp':<28}{statistics.median(r[0] for r in ratios):>15.2f}"
              f"{statistics.median(r[1] for r in ratios):>15.2f}")


if __name__ == "__main__":
    main()
