#!/usr/bin/env python3
"""Writes request_fuzz's seed inputs: one byte (bit 0: streaming) then a GenerateRequest,
encoded from the text protos below by protoc, so the fuzzer starts from requests that reach
every policy, budget form and prompt form. Usage: make_request_seeds.py OUT_DIR."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROTO_DIR = os.path.join(ROOT, "proto")

SEEDS = {
    "text": 'prompts { text: "hello world" } stopping { max_new_tokens: 4 }',
    "tokens": "prompts { token_ids: [1, 2, 3, 4, 5, 6, 7, 8] } stopping { max_new_tokens: 3 ignore_eos: true }",
    "chat": 'prompts { messages { role: "system" content: "be brief" } messages { role: "user" content: "hi?" } }',
    "two_prompts": 'prompts { text: "a" } prompts { text: "bb" } sampling { temperature: 0.7 top_k: 5 seed: 3 }',
    "stops": 'prompts { text: "abcabc" } stopping { stop_sequences: ["ca"] stop_token_ids: [99] }',
    "logprobs": 'prompts { text: "xyz" } logprobs { top_logprobs: 3 } sampling { top_p: 0.9 min_p: 0.1 }',
    "penalties": 'prompts { text: "aaaa" } sampling { repetition_penalty: 1.3 presence_penalty: 0.5 '
                 'frequency_penalty: 0.2 }',
}
LONG = '"' + "the quick brown fox jumps over the lazy dog " * 8 + '"'
for policy in ["snapkv", "criticalkv", "pyramid", "keydiff", "streaming", "mergereduce:random",
               "mergereduce:cluster", "full"]:
    name = policy.replace(":", "_")
    SEEDS["kv_" + name] = f'prompts {{ text: {LONG} }} kv {{ policy: "{policy}" budget: 0.3 window: 4 }}'
SEEDS["kv_chunk_question"] = (f'prompts {{ text: {LONG} }} kv {{ policy: "snapkv" budget: 32 compress_at: "chunk" '
                              'chunk_scoring: "question" question_tokens: 6 }')
SEEDS["kv_chunk_sinks"] = (f'prompts {{ text: {LONG} }} kv {{ policy: "criticalkv" budget: 24 compress_at: "chunk" '
                           'sink_tokens: 12 }')
SEEDS["kv_layer_budgets"] = f'prompts {{ text: {LONG} }} kv {{ policy: "criticalkv" layer_budgets: [16, 24] }}'
SEEDS["kv_plan"] = (f'prompts {{ text: {LONG} }} kv {{ policy: "snapkv" budget: 0.5 budget_plan: "pyramid" '
                    'pool_kernel: 5 first_stage_ratio: 0.4 }')
SEEDS["kv_auto_risk"] = f'prompts {{ text: {LONG} }} kv {{ policy: "snapkv" budget_auto_risk: 0.1 }}'
SEEDS["kv_cluster_dims"] = (f'prompts {{ text: {LONG} }} kv {{ policy: "mergereduce:cluster" budget: 40 '
                            'reduce_protected_dims: 8 }')


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for i, (name, text) in enumerate(sorted(SEEDS.items())):
        encoded = subprocess.run(
            ["protoc", f"-I{PROTO_DIR}", "--encode=kvserve.v1.GenerateRequest", "kvserve/v1/generation.proto"],
            input=text.encode(), capture_output=True, check=True).stdout
        with open(os.path.join(out, name), "wb") as f:
            f.write(bytes([i & 1]) + encoded)


if __name__ == "__main__":
    main()
