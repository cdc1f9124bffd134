#!/usr/bin/env python3
"""A minimal OpenAI /v1/completions scorer on llama.cpp (llama-cpp-python), for lm-eval's
loglikelihood requests: prompt as text, token ids or a list of either; echo; logprobs N;
max_tokens 0 or 1 (greedy). llama.cpp's own llama-server refuses `echo` ("Only no echo is
supported"), so scripts/lm_eval_vs_llama_cpp.py runs this instead: llama.cpp computes every
prompt row's logits (Llama(logits_all=True)), log-softmax here in float64, and the response
has OpenAI's legacy logprobs shape (tokens, token_logprobs, top_logprobs, text_offset).

  python3 scripts/llama_cpp_scoring_server.py --model M.gguf --port 8091
"""
import argparse
import json
from http.server import BaseHTTPRequestHandler, HTTPServer

import llama_cpp
import numpy as np


def log_softmax(rows):
    rows = rows.astype(np.float64)
    m = rows.max(axis=1, keepdims=True)
    return rows - m - np.log(np.exp(rows - m).sum(axis=1, keepdims=True))


class Scorer:
    def __init__(self, model, n_ctx):
        self.llm = llama_cpp.Llama(model_path=model, n_ctx=n_ctx, n_batch=512, logits_all=True, n_threads=2,
                                   verbose=False)

    def piece(self, t):
        return self.llm.detokenize([t]).decode("utf-8", "replace")

    def choice(self, index, prompt, echo, top_n, max_tokens):
        ids = prompt if isinstance(prompt, list) else self.llm.tokenize(prompt.encode(), add_bos=False, special=True)
        self.llm.reset()
        self.llm.eval(ids)
        ls = log_softmax(np.array(self.llm.scores[:len(ids)], dtype=np.float32))
        tokens, token_lps, tops, offsets, offset = [], [], [], [], 0

        def add(tok, row):
            nonlocal offset
            tokens.append(self.piece(tok))
            offsets.append(offset)
            offset += len(self.llm.detokenize([tok]))
            if row is None:
                token_lps.append(None)
                tops.append(None)
                return
            token_lps.append(float(row[tok]))
            best = np.argsort(-row, kind="stable")[:top_n]
            tops.append({self.piece(int(b)): float(row[b]) for b in best})

        if echo:
            for i, t in enumerate(ids):
                add(t, None if i == 0 else ls[i - 1])
        text = self.llm.detokenize(ids).decode("utf-8", "replace") if echo else ""
        if max_tokens > 0:
            gen = int(np.argmax(ls[-1]))
            add(gen, ls[-1])
            text += self.piece(gen)
        return {"index": index, "text": text, "finish_reason": "length",
                "logprobs": {"tokens": tokens, "token_logprobs": token_lps, "top_logprobs": tops,
                             "text_offset": offsets} if top_n is not None else None}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--port", type=int, default=8091)
    ap.add_argument("--n-ctx", type=int, default=2048)
    a = ap.parse_args()
    scorer = Scorer(a.model, a.n_ctx)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def reply(self, status, obj):
            body = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path.rstrip("/") == "/v1/models":
                return self.reply(200, {"object": "list", "data": [{"id": "llama.cpp", "object": "model"}]})
            self.reply(404, {"error": {"message": "not found"}})

        def do_POST(self):
            if self.path != "/v1/completions":
                return self.reply(404, {"error": {"message": "not found"}})
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            p = body["prompt"]
            batch = p if isinstance(p, list) and p and not isinstance(p[0], int) else [p]
            max_tokens = int(body.get("max_tokens", 16))
            if max_tokens > 1 or body.get("temperature", 1) != 0 and max_tokens > 0:
                return self.reply(400, {"error": {"message": "this scorer does greedy max_tokens <= 1 only"}})
            top_n = body.get("logprobs")
            choices = [scorer.choice(i, x, bool(body.get("echo")), top_n, max_tokens) for i, x in enumerate(batch)]
            self.reply(200, {"id": "cmpl-llamacpp", "object": "text_completion", "model": "llama.cpp",
                             "choices": choices})

    HTTPServer(("127.0.0.1", a.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
