#!/usr/bin/env python3
"""lm-evaluation-harness against kvserve's /v1/completions and against llama.cpp, same task,
same GGUF, same token ids; prints accuracy with a 95% Wilson interval for both (docs/QUALITY.md).

The task is LAMBADA's form (predict a passage's last word; `acc` = the word is the greedy
continuation, `perplexity` of the word) built from the repo's public-domain corpus
(tests/data/corpus), since this machine cannot download datasets: `austen_lastword`, N
passages of ~80 words ending at a sentence's last word (seeded, so every run sees the same).
lm-eval's `local-completions` model sends token ids (tokenized_requests) made by a Hugging
Face tokenizer built here from the GGUF's own vocabulary and merges, so both servers score the
same ids. llama.cpp's llama-server refuses `echo`, so the llama.cpp side is
scripts/llama_cpp_scoring_server.py (llama-cpp-python, logits_all) behind the same API.

Needs: a venv with lm-eval, transformers and gguf (`pip install "lm-eval[api]" transformers gguf`),
and a Python that imports llama_cpp for the llama.cpp side:
  /tmp/lmeval-venv/bin/python scripts/lm_eval_vs_llama_cpp.py --limit 200 \\
      --llama-python "env PYTHONPATH=$L LLAMA_CPP_LIB_PATH=$L/vendor/llama.cpp/build/bin /tmp/peervenv/bin/python"
"""
import argparse
import json
import os
import pathlib
import random
import re
import shlex
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from quality_stats import wilson  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
BOOKS = ["emma.txt", "mansfield_park.txt", "northanger_abbey.txt", "persuasion.txt", "pride_and_prejudice.txt",
         "sense_and_sensibility.txt"]
TASK_YAML = """task: austen_lastword
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: loglikelihood
doc_to_text: "{{{{text.split(' ')[:-1]|join(' ')}}}}"
doc_to_target: "{{{{' '+text.split(' ')[-1]}}}}"
metric_list:
  - metric: perplexity
    aggregation: perplexity
    higher_is_better: false
  - metric: acc
    aggregation: mean
    higher_is_better: true
"""


def make_task(out_dir, n, seed=0):
    rng = random.Random(seed)
    docs = []
    texts = {b: re.sub(r"\s+", " ", (ROOT / "tests/data/corpus" / b).read_text(encoding="utf-8")) for b in BOOKS}
    while len(docs) < n:
        t = texts[rng.choice(BOOKS)]
        end = t.find(". ", rng.randrange(2000, len(t) - 2000))
        words = t[:end].split(" ")
        if not re.fullmatch(r"[A-Za-z]{4,}", words[-1]):
            continue
        docs.append({"text": " ".join(words[-80:])})
    data = out_dir / "austen_lastword.jsonl"
    data.write_text("".join(json.dumps(d) + "\n" for d in docs))
    (out_dir / "austen_lastword.yaml").write_text(TASK_YAML.format(data=data))
    return docs


def make_hf_tokenizer(gguf_path, out_dir):
    """The GGUF's byte-level BPE as a Hugging Face tokenizer (SmolLM2: digits split one by one)."""
    import gguf
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    r = gguf.GGUFReader(str(gguf_path))

    def strings(key):
        f = r.fields[key]
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]
    tokens, merges = strings("tokenizer.ggml.tokens"), strings("tokenizer.ggml.merges")
    types = [int(r.fields["tokenizer.ggml.token_type"].parts[i][0]) for i in r.fields["tokenizer.ggml.token_type"].data]
    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=[tuple(m.split(" ", 1)) for m in merges]))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    special = [t for t, ty in zip(tokens, types) if ty == 3]  # control tokens
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", additional_special_tokens=special)
    hf.save_pretrained(out_dir)
    return hf


def wait_http(url, proc, what, timeout_s=300):
    for _ in range(timeout_s * 10):
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except Exception:
            if proc.poll() is not None:
                sys.exit(f"{what} exited")
            time.sleep(0.1)
    sys.exit(f"{what} did not come up")


def run_lm_eval(base_url, tok_dir, tasks_dir, limit, out):
    cmd = [sys.executable, "-m", "lm_eval", "--model", "local-completions", "--model_args",
           f"model=smollm2,base_url={base_url},tokenizer_backend=huggingface,tokenizer={tok_dir},"
           "tokenized_requests=True,num_concurrent=1,max_retries=2",
           "--tasks", "austen_lastword", "--include_path", str(tasks_dir), "--limit", str(limit),
           "--batch_size", "1", "--output_path", str(out), "--log_samples"]
    env = dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    t0 = time.time()
    subprocess.run(cmd, check=True, env=env)
    result = json.loads(next(pathlib.Path(out).rglob("results_*.json")).read_text())
    # Per passage: (loglikelihood of the word, whether it is the greedy continuation).
    samples = {}
    for line in next(pathlib.Path(out).rglob("samples_austen_lastword_*.jsonl")).read_text().splitlines():
        d = json.loads(line)
        ll, greedy = d["filtered_resps"][0]
        samples[d["doc_id"]] = (float(ll), bool(greedy))
    return result["results"]["austen_lastword"], samples, time.time() - t0, " ".join(shlex.quote(c) for c in cmd)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=str(ROOT / "models/SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--kvserve", default=str(ROOT / "build/kvserve"))
    ap.add_argument("--llama-python", required=True, help="command that runs a Python importing llama_cpp")
    ap.add_argument("--limit", type=int, default=200)
    ap.add_argument("--work", default=None, help="keep the task, tokenizer and lm-eval outputs here")
    a = ap.parse_args()
    work = pathlib.Path(a.work or tempfile.mkdtemp(prefix="lm_eval_vs_llama_cpp_"))
    work.mkdir(parents=True, exist_ok=True)
    docs = make_task(work, a.limit)
    hf = make_hf_tokenizer(a.model, work / "tokenizer")
    env = dict(os.environ, OMP_WAIT_POLICY="passive")

    rows = []
    # kvserve: the HTTP API on a free port (the port file says which).
    ports = work / "ports"
    ports.unlink(missing_ok=True)
    serve = subprocess.Popen(["nice", "-n", "10", a.kvserve, "serve", "--model", a.model, "--port", "0",
                              "--metrics-port", "0", "--http-port", "0", "--port-file", str(ports)],
                             stdout=open(work / "kvserve.log", "w"), stderr=subprocess.STDOUT, env=env)
    try:
        while not ports.exists() or "http=" not in ports.read_text():
            if serve.poll() is not None:
                sys.exit("kvserve serve exited; see kvserve.log")
            time.sleep(0.1)
        port = int(re.search(r"http=(\d+)", ports.read_text()).group(1))
        wait_http(f"http://127.0.0.1:{port}/health", serve, "kvserve")
        # The HF tokenizer built here must split text as kvserve does (else the ids differ from
        # what the model was trained on); checked on every passage.
        same = 0
        for d in docs:
            req = urllib.request.Request(f"http://127.0.0.1:{port}/tokenize",
                                         json.dumps({"prompt": d["text"], "add_special_tokens": False}).encode(),
                                         {"Content-Type": "application/json"})
            same += json.load(urllib.request.urlopen(req))["tokens"] == hf(d["text"])["input_ids"]
        print(f"tokenizer check: {same}/{len(docs)} passages tokenized identically by kvserve and the HF tokenizer")
        rows.append(("kvserve", *run_lm_eval(f"http://127.0.0.1:{port}/v1/completions", work / "tokenizer", work,
                                             a.limit, work / "out_kvserve")))
    finally:
        serve.terminate()
        serve.wait(timeout=60)

    llama = subprocess.Popen(shlex.split(a.llama_python) + [str(ROOT / "scripts/llama_cpp_scoring_server.py"),
                                                            "--model", a.model, "--port", "8091"],
                             stdout=open(work / "llama_cpp.log", "w"), stderr=subprocess.STDOUT, env=env)
    try:
        wait_http("http://127.0.0.1:8091/v1/models", llama, "llama.cpp scorer")
        rows.append(("llama.cpp", *run_lm_eval("http://127.0.0.1:8091/v1/completions", work / "tokenizer", work,
                                               a.limit, work / "out_llama_cpp")))
    finally:
        llama.terminate()
        llama.wait(timeout=60)

    print(f"\nausten_lastword, {a.limit} passages, {time.strftime('%Y-%m-%d')}")
    print("| server | acc | 95% CI (Wilson) | perplexity | wall s |")
    print("|---|---|---|---|---|")
    for name, res, _, wall, cmd in rows:
        acc = res["acc,none"]
        lo, hi = wilson(round(acc * a.limit), a.limit)
        print(f"| {name} | {acc:.3f} | [{lo:.3f}, {hi:.3f}] | {res['perplexity,none']:.2f} | {wall:.0f} |")
    (_, _, ours, _, _), (_, _, theirs, _, _) = rows
    common = sorted(set(ours) & set(theirs))
    diff = [abs(ours[i][0] - theirs[i][0]) for i in common]
    same = sum(ours[i][1] == theirs[i][1] for i in common)
    print(f"\nper passage, kvserve vs llama.cpp: |loglikelihood difference| mean {sum(diff) / len(diff):.4f}, "
          f"max {max(diff):.4f} nats; greedy verdict the same on {same}/{len(common)}")
    for name, _, _, _, cmd in rows:
        print(f"\n{name}: {cmd}")


if __name__ == "__main__":
    main()
