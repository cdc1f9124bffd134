#!/usr/bin/env python3
"""Prompt logprobs: kvserve's /v1/completions (echo + logprobs) against llama.cpp's on one GGUF.

llama.cpp's figures come from llama-cpp-python (Llama(logits_all=True): every prompt row's
logits, log-softmax here in float64); kvserve's from a `kvserve serve --http-port` this script
starts. Both see the same token ids (llama.cpp's tokenizer). Prints, over every scored prompt
token: mean and max |logprob difference| and how often the two argmax predictions agree (and
where they differ, whether llama.cpp's top-2 gap was a near-tie). llama.cpp keeps its KV cache
in f16, kvserve in f32 (the default --kv-dtype), so expect small differences, not identity.

--write-golden FILE also writes the token ids, llama.cpp's logprob of each prompt token and
its argmax per position, for tests/engine/scheduler/llama_cpp_prompt_logprobs_test.cc.

Run (a llama-cpp-python source tree with its built libraries; only this script imports it):
  L=/path/to/llama_cpp_python-0.3.36
  PYTHONPATH=$L LLAMA_CPP_LIB_PATH=$L/vendor/llama.cpp/build/bin python3 \\
      scripts/check_prompt_logprobs_vs_llama_cpp.py --model models/SmolLM2-135M-Instruct.Q4_1.gguf \\
      [--write-golden tests/golden/llama_cpp/prompt_logprobs_smollm2.json]
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Prompts: passages of the repo's public-domain corpus at fixed offsets, plus a chat turn and
# code, so positions past one 512-token prefill chunk are covered too.
CORPUS = ROOT / "tests/data/corpus"
PASSAGES = [("emma.txt", 20000, 2600), ("persuasion.txt", 30000, 1200), ("pride_and_prejudice.txt", 40000, 900)]
EXTRA = [
    "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\nThe capital of France is Paris.",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n",
]


def prompts():
    out = []
    for name, start, length in PASSAGES:
        text = (CORPUS / name).read_text(encoding="utf-8")[start:start + length]
        out.append(text[text.index(" ") + 1:])  # start at a word
    return out + EXTRA


def log_softmax(rows):
    rows = rows.astype(np.float64)
    m = rows.max(axis=1, keepdims=True)
    return rows - m - np.log(np.exp(rows - m).sum(axis=1, keepdims=True))


def llama_cpp_scores(model, texts):
    import llama_cpp
    llm = llama_cpp.Llama(model_path=str(model), n_ctx=2048, n_batch=512, logits_all=True, n_threads=2,
                          verbose=False)
    cases = []
    for text in texts:
        ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        llm.reset()
        llm.eval(ids)
        ls = log_softmax(np.array(llm.scores[:len(ids)], dtype=np.float32))
        # Row i predicts token i + 1; the last row predicts past the prompt.
        logprob = [float(ls[i, ids[i + 1]]) for i in range(len(ids) - 1)]
        top2 = np.argsort(-ls[:-1], axis=1, kind="stable")[:, :2]
        gap = [float(ls[i, top2[i, 0]] - ls[i, top2[i, 1]]) for i in range(len(ids) - 1)]
        cases.append({"prompt_ids": ids, "logprob": logprob, "argmax": [int(t) for t in top2[:, 0]], "top2_gap": gap})
    return cases


def start_kvserve(binary, model, tmp):
    port_file = os.path.join(tmp, "ports")
    log = open(os.path.join(tmp, "serve.log"), "w")
    proc = subprocess.Popen([binary, "serve", "--model", str(model), "--port", "0", "--metrics-port", "0",
                             "--http-port", "0", "--port-file", port_file], stdout=log, stderr=subprocess.STDOUT)
    for _ in range(600):
        if os.path.exists(port_file):
            ports = dict(line.split("=", 1) for line in open(port_file).read().split() if "=" in line)
            if "http" in ports:
                try:  # 503 while the model loads
                    urllib.request.urlopen(f"http://127.0.0.1:{ports['http']}/health", timeout=2)
                    return proc, int(ports["http"])
                except OSError:
                    pass
        if proc.poll() is not None:
            sys.exit(f"kvserve serve exited: see {tmp}/serve.log")
        time.sleep(0.1)
    proc.kill()
    sys.exit("kvserve serve did not write its ports")


def kvserve_scores(port, ids):
    body = json.dumps({"prompt": ids, "echo": True, "logprobs": 1, "max_tokens": 0, "temperature": 0}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        lp = json.load(r)["choices"][0]["logprobs"]
    assert len(lp["token_logprobs"]) == len(ids) and lp["token_logprobs"][0] is None
    return lp["token_logprobs"][1:], lp["top_logprobs"][1:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=str(ROOT / "models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--kvserve", default=str(ROOT / "build/kvserve"))
    ap.add_argument("--write-golden", help="also write the golden JSON here")
    a = ap.parse_args()
    cases = llama_cpp_scores(a.model, prompts())
    with tempfile.TemporaryDirectory() as tmp:
        proc, port = start_kvserve(a.kvserve, a.model, tmp)
        try:
            diffs, same, near_tie_misses, n = [], 0, 0, 0
            for c in cases:
                ours, top = kvserve_scores(port, c["prompt_ids"])
                diffs += [abs(x - y) for x, y in zip(ours, c["logprob"])]
                # Our argmax: the one alternative's logprob equals the token's own when the token is it.
                for i, (lp, alt) in enumerate(zip(ours, top)):
                    ours_is_argmax = abs(lp - max(alt.values())) < 1e-6
                    theirs_is_argmax = c["argmax"][i] == c["prompt_ids"][i + 1]
                    n += 1
                    if ours_is_argmax == theirs_is_argmax:
                        same += 1
                    elif c["top2_gap"][i] < 0.5:
                        near_tie_misses += 1
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    d = np.array(diffs)
    print(f"{len(cases)} prompts, {n} scored tokens ({sum(len(c['prompt_ids']) for c in cases)} prompt tokens)")
    print(f"|logprob kvserve - llama.cpp|: mean {d.mean():.4f}, median {np.median(d):.4f}, "
          f"p99 {np.quantile(d, 0.99):.4f}, max {d.max():.4f}")
    print(f"is-the-token-the-argmax agrees at {same}/{n} = {same / n:.4f} of positions; "
          f"{near_tie_misses} of the {n - same} disagreements at a llama.cpp top-2 gap < 0.5 nat")
    if a.write_golden:
        for c in cases:
            c["logprob"] = [round(x, 5) for x in c["logprob"]]
            c["top2_gap"] = [round(x, 4) for x in c["top2_gap"]]
        pathlib.Path(a.write_golden).write_text(json.dumps(
            {"model": pathlib.Path(a.model).name, "made_by": "scripts/check_prompt_logprobs_vs_llama_cpp.py",
             "llama_cpp_python": "0.3.36", "cases": cases}) + "\n")
        print("wrote", a.write_golden)


if __name__ == "__main__":
    main()
