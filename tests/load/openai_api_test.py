#!/usr/bin/env python3
"""kvserve's OpenAI-compatible HTTP API driven by the real `openai` SDK (from PyPI, in the kvload
venv) against a live `kvserve serve --http-port` on SmolLM2 with an API key: models, unary
completion and chat, echo with logprobs (prompt scores, max_tokens 0), streams (with include_usage,
logprobs, n), errors as the SDK raises them
(400 naming the field, 401, 404), a stream closed early (its request cancelled, its pages back
in the pool, read from /metrics), and load-tests/openai_examples.py, the SDK's own README
examples, unchanged but for base_url.

Usage: openai_api_test.py KVSERVE MODEL --venv VENV
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

KEY = "openai-test-0123456789abcdef"
HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "load-tests", "openai_examples.py")


def metric(port, key):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith(key + " "):
            return float(line.split()[-1])
    return None


def wait_for(pred, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return True
        time.sleep(0.1)
    return False


def main():
    kvserve, model, venv = sys.argv[1], sys.argv[2], sys.argv[sys.argv.index("--venv") + 1]
    if os.path.realpath(sys.prefix) != os.path.realpath(venv):
        os.execv(os.path.join(venv, "bin", "python"), [os.path.join(venv, "bin", "python")] + sys.argv)
    import openai
    from openai import OpenAI

    work = tempfile.mkdtemp(prefix="kvserve-openai-")
    keys, ports = os.path.join(work, "keys"), os.path.join(work, "ports")
    with open(keys, "w") as f:
        f.write(KEY + "\n")
    log = open(os.path.join(work, "stderr"), "w+")
    server = subprocess.Popen([kvserve, "serve", "--model", model, "--host", "127.0.0.1", "--port", "0",
                               "--metrics-port", "0", "--http-port", "0", "--port-file", ports,
                               "--kv-memory", "256M", "--api-key-file", keys], stderr=log)
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)
            print("BAD", what, flush=True)

    try:
        assert wait_for(lambda: os.path.exists(ports), 60), "no port file"
        port_of = dict(line.split("=") for line in open(ports).read().split())
        http, metrics = int(port_of["http"]), int(port_of["metrics"])
        base = f"http://127.0.0.1:{http}/v1"
        client = OpenAI(base_url=base, api_key=KEY, max_retries=0, timeout=120)
        assert wait_for(lambda: _alive(http), 120), "not healthy"

        models = client.models.list().data
        check(len(models) == 1 and models[0].id.endswith(".gguf"), f"models: {models}")

        # Unary completion: greedy twice gives the same text; usage carries the KV figures.
        kw = dict(model="m", prompt="The capital of France is", max_tokens=8, temperature=0)
        a, b = client.completions.create(**kw), client.completions.create(**kw)
        check(a.choices[0].text == b.choices[0].text and a.choices[0].text, "greedy completion not repeatable")
        check(a.usage.completion_tokens == 8 and a.usage.total_tokens == a.usage.prompt_tokens + 8,
              f"usage {a.usage}")
        check((a.usage.model_extra or {}).get("kv", {}).get("peak_kv_bytes", 0) > 0, "usage.kv.peak_kv_bytes")

        # Echo with logprobs (lm-evaluation-harness's loglikelihood call): the prompt's tokens
        # first, the first one without a logprob, then the generated token; max_tokens 0 scores
        # the prompt alone, with the same figures.
        tok = urllib.request.Request(f"http://127.0.0.1:{http}/tokenize",
                                     json.dumps({"prompt": "The capital of France is Paris"}).encode(),
                                     {"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"})
        ids = json.load(urllib.request.urlopen(tok, timeout=30))["tokens"]
        lm = client.completions.create(model="m", prompt=ids, max_tokens=1, temperature=0, logprobs=1, echo=True)
        lp = lm.choices[0].logprobs
        check(len(lp.tokens) == len(ids) + 1 and lp.token_logprobs[0] is None and lp.top_logprobs[0] is None,
              f"echo logprobs shape {lp}")
        check(all(x <= 0 for x in lp.token_logprobs[1:]) and lm.choices[0].text.startswith("The capital"),
              f"echo logprobs values {lp.token_logprobs} text {lm.choices[0].text!r}")
        only = client.completions.create(model="m", prompt=ids, max_tokens=0, temperature=0, logprobs=1, echo=True)
        lp0 = only.choices[0].logprobs
        check(len(lp0.tokens) == len(ids) and only.usage.completion_tokens == 0, f"max_tokens 0 {only}")
        check(all(abs(x - y) < 1e-4 for x, y in zip(lp0.token_logprobs[1:], lp.token_logprobs[1:len(ids)])),
              "max_tokens 0 scores differ from max_tokens 1's")
        # " Paris" after "The capital of France is" is the model's greedy choice.
        check(lp0.token_logprobs[-1] == max(lp0.top_logprobs[-1].values()), f"Paris not greedy: {lp0.top_logprobs[-1]}")

        # Chat, unary and streamed: the same greedy text; the stream ends with the usage chunk.
        msgs = [{"role": "user", "content": "Name three colors."}]
        chat = client.chat.completions.create(model="m", messages=msgs, max_tokens=12, temperature=0)
        text = chat.choices[0].message.content
        check(chat.choices[0].message.role == "assistant" and text, "chat reply")
        pieces, usage = [], None
        for chunk in client.chat.completions.create(model="m", messages=msgs, max_tokens=12, temperature=0,
                                                    stream=True, stream_options={"include_usage": True},
                                                    logprobs=True, top_logprobs=2):
            if chunk.usage:
                usage = chunk.usage
            for c in chunk.choices:
                pieces.append(c.delta.content or "")
                if c.logprobs and c.logprobs.content:
                    check(all(len(t.top_logprobs) == 2 for t in c.logprobs.content), "top_logprobs per token")
        check("".join(pieces) == text, f"stream text {''.join(pieces)!r} != unary {text!r}")
        check(usage is not None and usage.completion_tokens == chat.usage.completion_tokens, f"stream usage {usage}")

        # n choices in a completion stream, each with its index and finish reason.
        finished = {}
        for chunk in client.completions.create(model="m", prompt="Once upon a time", max_tokens=6, n=2,
                                               temperature=0.9, seed=3, stream=True,
                                               extra_body={"ignore_eos": True}):
            for c in chunk.choices:
                if c.finish_reason:
                    finished[c.index] = c.finish_reason
        check(finished == {0: "length", 1: "length"}, f"n=2 stream finish reasons {finished}")

        # Errors as the SDK raises them.
        try:
            client.completions.create(model="m", prompt="x", max_tokens=4, temperature=-1)
            check(False, "temperature -1 accepted")
        except openai.BadRequestError as e:
            check(e.status_code == 400 and e.body.get("param") == "temperature", f"400 body {e.body}")
        try:
            client.completions.create(model="m", prompt="x", max_tokens=4, extra_body={"kv_policy": "nope"})
            check(False, "kv_policy nope accepted")
        except openai.BadRequestError as e:
            check(e.body.get("param") == "kv_policy" and "nope" in e.body.get("message", ""), f"kv 400 {e.body}")
        try:
            OpenAI(base_url=base, api_key="wrong-key-0123456789", max_retries=0).models.list()
            check(False, "a wrong key went through")
        except openai.AuthenticationError as e:
            check(e.status_code == 401, "401")
        try:
            client.post("/nothing", cast_to=object, body={})
            check(False, "unknown path answered")
        except openai.NotFoundError:
            pass
        # KV extras go through extra_body and show in usage.kv.
        kv = client.completions.create(model="m", prompt="one two three four five six seven eight " * 20,
                                       max_tokens=2, extra_body={"kv_policy": "snapkv", "kv_budget": 32})
        check(kv.usage.model_extra["kv"]["kv_entries_evicted"] > 0, f"snapkv evicted nothing: {kv.usage}")

        # A stream closed after two chunks: the request is cancelled and its pages come back.
        before = metric(metrics, 'kvserve_request_success_total{finish_reason="cancelled"}') or 0
        stream = client.chat.completions.create(model="m", messages=msgs, max_tokens=2000, stream=True,
                                                extra_body={"ignore_eos": True})
        for i, _ in enumerate(stream):
            if i == 2:
                break
        stream.close()
        check(wait_for(lambda: (metric(metrics, 'kvserve_request_success_total{finish_reason="cancelled"}') or 0)
                       == before + 1, 15), "closing the stream did not cancel the request")
        check(wait_for(lambda: metric(metrics, "kvserve_kv_pages_used") == 0
                       and metric(metrics, "kvserve_kv_pages_reserved") == 0, 15), "pages not back after close")

        # The SDK's README examples, unchanged but for base_url.
        env = dict(os.environ, OPENAI_API_KEY=KEY)
        run = subprocess.run([sys.executable, EXAMPLES, base], env=env, capture_output=True, text=True, timeout=600)
        check(run.returncode == 0 and run.stdout.strip(), f"openai_examples.py failed: {run.stderr[-2000:]}")
        check(server.poll() is None, "the server exited")
    finally:
        server.kill()
        server.wait()
        if failures:
            log.seek(0)
            print(log.read()[-4000:])
    print("ok" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


def _alive(port):
    """True once /health answers 200 (urlopen raises on the 503 of a loading server)."""
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
        return True
    except Exception:
        return False


if __name__ == "__main__":
    sys.exit(main())
