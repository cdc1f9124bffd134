#!/usr/bin/env python3
"""Greedy generation golden data from llama.cpp (llama-cpp-python) on the default model.

For each prompt: the prompt's token ids (llama.cpp's tokenizer), the 32 greedy tokens
llama.cpp generates, and at every step the top-20 logits (ids and values), so the C++ test
can check identical tokens and report logit agreement without a Python stack in CI.

Regenerate:  python3 -m venv /opt/golden-venv && /opt/golden-venv/bin/pip install llama-cpp-python==0.3.36 numpy
             /opt/golden-venv/bin/python tests/golden/make_generation_golden.py models/SmolLM2-135M-Instruct.Q4_1.gguf
"""
import json
import sys

import llama_cpp
import numpy as np

N_NEW = 32
TOP = 20
PROMPTS = [
    ("chat", "What is the capital of France?"),
    ("chat", "Write a short poem about the sea."),
    ("chat", "Explain what a KV cache is in one paragraph."),
    ("chat", "List three prime numbers greater than 100."),
    ("raw", "The quick brown fox"),
    ("raw", "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n"),
    ("raw", "Once upon a time, in a small village by the mountains, there lived"),
    ("raw", "1, 2, 3, 5, 8, 13,"),
    ("raw", "La capitale de l'Allemagne est"),
    ("chat", "Translate 'good morning' into Spanish, German and Japanese."),
]


def chat(text):
    # SmolLM2's template with its default system prompt (what the GGUF template renders).
    return ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
            "<|im_end|>\n<|im_start|>user\n" + text + "<|im_end|>\n<|im_start|>assistant\n")


def main():
    path = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else "tests/golden/llama_cpp/greedy_smollm2.json"
    llm = llama_cpp.Llama(model_path=path, n_ctx=1024, n_batch=512, logits_all=True, n_threads=2,
                          verbose=False, seed=0)
    cases = []
    for kind, text in PROMPTS:
        full = chat(text) if kind == "chat" else text
        ids = llm.tokenize(full.encode("utf-8"), add_bos=False, special=True)
        llm.reset()
        llm.eval(ids)
        generated, steps = [], []
        for _ in range(N_NEW):
            logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
            top = np.argsort(-logits, kind="stable")[:TOP]
            tok = int(top[0])
            steps.append({"ids": [int(i) for i in top], "logits": [float(logits[i]) for i in top]})
            generated.append(tok)
            llm.eval([tok])
        cases.append({"kind": kind, "text": text, "prompt_ids": ids, "generated": generated,
                      "generated_text": llm.detokenize(generated).decode("utf-8", "replace"),
                      "steps": steps})
    meta = {"llama_cpp_python": llama_cpp.__version__, "model": "SmolLM2-135M-Instruct.Q4_1.gguf",
            "n_new": N_NEW, "top": TOP}
    with open(out, "w") as f:
        json.dump({"meta": meta, "cases": cases}, f, separators=(",", ":"))
    print(f"wrote {len(cases)} cases to {out}")


if __name__ == "__main__":
    main()
